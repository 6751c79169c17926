"""ATen's elementwise ops, activations and reductions as registry ops (`torch_aten`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .aten_table import ATEN, Entry, aten, axes_of, operand, scaled
from .program import call, scalar
from .tables import Emit, V, need

# -- elementwise -------------------------------------------------------------------------

_UNARY = {name: name for name in (
    "neg", "exp", "log", "sqrt", "abs", "sin", "cos", "tan", "tanh", "sigmoid", "relu",
    "log1p", "expm1", "reciprocal", "rsqrt", "erf", "sign", "floor", "ceil", "round", "silu",
)}  # fmt: skip
for _name, _op in _UNARY.items():
    ATEN[_name] = lambda e, a, _op=_op: call(_op, a["self"].text)


@aten("add")
def _add(e: Emit, a: dict) -> str:
    return f"{operand(a['self'])} + {scaled(a['other'], a.get('alpha', 1))}"


@aten("sub")
def _sub(e: Emit, a: dict) -> str:
    return f"{operand(a['self'])} - {scaled(a['other'], a.get('alpha', 1))}"


@aten("rsub")
def _rsub(e: Emit, a: dict) -> str:
    return f"{operand(a['other'])} - {scaled(a['self'], a.get('alpha', 1))}"


@aten("mul")
def _mul(e: Emit, a: dict) -> str:
    return f"{operand(a['self'])} * {operand(a['other'])}"


@aten("div")
def _div(e: Emit, a: dict) -> str:
    need(a.get("rounding_mode") is None, "a rounding division has no gradient to check")
    return f"{operand(a['self'])} / {operand(a['other'])}"


@aten("pow")
def _pow(e: Emit, a: dict) -> str:
    base = a.get("self")
    return f"{operand(base)} ** {operand(a['exponent'])}"


ATEN["maximum"] = lambda e, a: call("maximum", operand(a["self"]), operand(a["other"]))
ATEN["minimum"] = lambda e, a: call("minimum", operand(a["self"]), operand(a["other"]))


@aten("clamp", "clip", "hardtanh", "clamp_min", "clamp_max")
def _clamp(e: Emit, a: dict) -> str:
    lo = a.get("min", a.get("min_val"))
    hi = a.get("max", a.get("max_val"))
    if isinstance(lo, V) or isinstance(hi, V):  # bounds that are tensors: maximum, minimum
        need(all(b is None or (isinstance(b, V) and b.const) for b in (lo, hi)), "live bounds")
        text = a["self"].text
        text = text if lo is None else call("maximum", text, lo.text)
        return text if hi is None else call("minimum", text, hi.text)
    return call("clip", a["self"].text, lo=lo, hi=hi)


@aten("where")
def _where(e: Emit, a: dict) -> str:
    cond = a["condition"]
    need(isinstance(cond, V) and cond.const, "a where whose condition is computed")
    mask = e.constant(cond.value.detach().numpy().astype(np.float64), "mask", False)
    return call("where", f"{mask} != 0.0", operand(a["self"]), operand(a["other"]))


@aten("masked_fill")
def _masked_fill(e: Emit, a: dict) -> str:
    mask, value = a["mask"], a["value"]
    need(isinstance(mask, V) and mask.const and not isinstance(value, V), "masked_fill")
    mask_name = e.constant(mask.value.detach().numpy().astype(np.float64), "mask", False)
    return call("where", f"{mask_name} != 0.0", scalar(value), a["self"].text)


@aten("addcmul")
def _addcmul(e: Emit, a: dict) -> str:
    product = f"{operand(a['tensor1'])} * {operand(a['tensor2'])}"
    return f"{operand(a['self'])} + {scaled(f'({product})', a['value'])}"


@aten("addcdiv")
def _addcdiv(e: Emit, a: dict) -> str:
    quotient = f"{operand(a['tensor1'])} / {operand(a['tensor2'])}"
    return f"{operand(a['self'])} + {scaled(f'({quotient})', a['value'])}"


@aten("lerp")
def _lerp(e: Emit, a: dict) -> str:
    start, end, weight = a["self"].text, operand(a["end"]), operand(a["weight"])
    return f"{start} + {weight} * ({end} - {start})"


# -- activations -------------------------------------------------------------------------

_SELU = (1.6732632423543772, 1.0507009873554805)


@aten("elu")
def _elu(e: Emit, a: dict) -> str:
    alpha, scale, input_scale = a["alpha"], a["scale"], a["input_scale"]
    need(input_scale == 1, "elu with an input_scale")
    if (alpha, scale) == _SELU:
        return call("selu", a["self"].text)
    need(scale == 1, "elu with a scale")
    return call("elu", a["self"].text, alpha=float(alpha))


ATEN["leaky_relu"] = lambda e, a: call(
    "leaky_relu", a["self"].text, alpha=float(a["negative_slope"])
)
ATEN["gelu"] = lambda e, a: call("gelu", a["self"].text, approximate=a["approximate"] == "tanh")


@aten("softplus")
def _softplus(e: Emit, a: dict) -> str:
    # threshold: above it torch returns x itself, which softplus is within 2e-9 of at 20
    need(a["beta"] == 1 and a["threshold"] >= 20, "softplus with a beta or a low threshold")
    return call("softplus", a["self"].text)


@aten("log_sigmoid_forward")
def _log_sigmoid(e: Emit, a: dict) -> list:
    return ["-" + call("softplus", f"-{a['self'].text}"), None]


# -- reductions --------------------------------------------------------------------------


def _reduce(op: str) -> Entry:
    def entry(e: Emit, a: dict) -> str:
        need(a.get("dtype") is None, f"{op} with a dtype")
        x = a["self"]
        return call(op, x.text, axis=axes_of(a.get("dim"), x.ndim), keepdims=bool(a.get("keepdim")))

    return entry


for _name, _op in (("sum", "sum"), ("mean", "mean"), ("amax", "max"), ("amin", "min"),
                   ("logsumexp", "logsumexp"), ("prod", "prod")):  # fmt: skip
    ATEN[_name] = _reduce(_op)


@aten("max", "min")
def _max(e: Emit, a: dict) -> Any:
    x = a["self"]
    op = a["__name__"]
    if "dim" not in a:  # the whole tensor
        return call(op, x.text)
    return [call(op, x.text, axis=axes_of(a["dim"], x.ndim), keepdims=bool(a["keepdim"])), None]


def _spread(op: str) -> Entry:
    def entry(e: Emit, a: dict) -> str:
        x = a["self"]
        axes = axes_of(a.get("dim"), x.ndim)
        text = call(op, x.text, axis=axes, keepdims=bool(a.get("keepdim")))
        correction = 1 if a.get("correction") is None else a["correction"]
        if a.get("unbiased") is False:
            correction = 0
        if correction == 0:
            return text
        n = int(np.prod([x.shape[d] for d in (axes if axes is not None else range(x.ndim))]))
        need(n > correction, f"{op} over {n} elements with correction {correction}")
        factor = n / (n - correction)
        return f"{text} * {scalar(factor if op == 'var' else factor**0.5)}"

    return entry


ATEN["var"], ATEN["std"] = _spread("var"), _spread("std")


@aten("linalg_vector_norm", "norm")
def _norm(e: Emit, a: dict) -> str:
    x, ord_ = a["self"], a.get("ord", a.get("p", 2))
    need(a.get("dtype") is None and ord_ in (1, 2, float("inf")), f"a vector norm of ord {ord_}")
    return call("norm", x.text, ord=2 if ord_ is None else ord_,
                axis=axes_of(a.get("dim"), x.ndim), keepdims=bool(a.get("keepdim")))  # fmt: skip


@aten("cumsum", "cumprod")
def _cumulative(e: Emit, a: dict) -> str:
    need(a.get("dtype") is None, "a running sum with a dtype")
    x = a["self"]
    return call(a["__name__"], x.text, axis=a["dim"] % max(x.ndim, 1))


@aten("_softmax", "_log_softmax")
def _softmax(e: Emit, a: dict) -> str:
    return call(a["__name__"].lstrip("_"), a["self"].text, axis=a["dim"])
