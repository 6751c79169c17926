"""The op registry: the one table every other part of gradcheck reads.

An op is declared once, as an `Op`: its tensor parameters and keyword attributes,
a shape rule, a NumPy forward, one NumPy VJP and one NumPy JVP per parameter and a
TensorFlow builder. The expression parser, the shape checker, the builtin engine, the
TensorFlow reference, `gradcheck ops` and the fault catalogue all look ops up here,
so adding an op is one `register(Op(...))` call plus its tests.

Conventions shared by every declaration:

* ``shape(*arg_shapes, **attrs)`` returns the output shape or raises `ShapeError`
  with a message that makes sense after the node's text
  (``matmul(h, w2): inner dimensions 4 and 3 differ``). It also validates attributes.
* ``forward(*args, **attrs)`` computes the value with NumPy: a function that calls it
  (``lambda a, b: np.add(a, b)``), not NumPy's own ``np.add``, and the shape rules are
  plain Python, so that declaring the ops imports no NumPy: ``gradcheck list`` and
  ``gradcheck ops`` read the declarations and compute nothing (`lazy_numpy`).
* ``vjps[i](g, ans, *args, **attrs)`` returns the vector-Jacobian product for
  parameter ``i``: ``g`` is the output's cotangent and ``ans`` the forward value.
  A VJP may return a gradient in the *broadcast* shape; the builtin engine sums it
  back to the argument's shape with `unbroadcast`, once, for every op.
* ``jvps[i](t, ans, *args, **attrs)`` returns the Jacobian-vector product for parameter
  ``i`` (forward mode, as autograd's ``defjvp``): ``t`` is that argument's tangent, and the
  result is the output's tangent, or its share from ``t``. A JVP may return it in the
  argument's shape where the output is a broadcast of it (``add``'s ``t``); the builtin
  engine broadcasts it to the output's shape, once, for every op.
* The VJPs are written with NumPy functions and operators only (no ``np.asarray``, no
  item assignment): the builtin engine's ``grad(..., create_graph=True)`` runs the same
  rules on its own tensors, which record every NumPy call as an op, so the gradient can
  be differentiated again (`engines/tensor.py`). An op a rule needs that NumPy has no
  function for is an `Op` called like a function (``SCATTER(g, shape=..., index=...)``):
  on arrays it is its forward, on such a tensor a node.
* ``tf(tf, *args, **attrs)`` builds the op from the TensorFlow module it is given,
  so that nothing here imports TensorFlow.
* ``vjps``, ``jvps`` and ``tf`` may be left out of a user-defined op (`gradcheck.op`,
  loaded with ``--ops``): without VJPs the builtin engine skips the op (without JVPs, in
  forward mode), without a TensorFlow builder only the numeric reference can judge it.
  ``origin`` says where a user op was declared (``file:line``); it is None for the
  builtin ops.
* Variadic ops (``concat``, ``stack``) take one list parameter. Their single VJP (and
  JVP) receives the list and the position ``i`` of the element being differentiated.
* A variadic op with a ``leading`` attribute (einsum's ``equation``) is written with that
  attribute first, a string, and its operands spread after it (``einsum("ij,jk->ik", a,
  b)``); engines get the operands spread too and the attribute by keyword
  (``einsum(self, *operands, equation)``). Its rules still receive the list.
* Ops with several outputs (``split``, ``unstack``, ``slogdet``) say how many they give:
  ``outputs(*arg_shapes, **attrs)`` returns the count (None, the default: one output).
  For them ``shape`` returns one shape per output (a tuple of shapes), ``forward`` and the
  TensorFlow builder a tuple (or list) of values, ``vjps[i](gs, ans, *args, **attrs)``
  gets ``gs``, one cotangent per output (zeros for an output nothing uses: its share of
  the gradient is zero), and ``ans``, the tuple of outputs; ``jvps[i]`` returns one
  tangent per output. An expression indexes such an op's value (``split(x, 2)[1]``, or
  ``parts = split(x, 2)`` then ``parts[1]``): in the graph (`expression.graph`) the op is
  one node and each output used is a node of its own, a *part*, whose argument it is.
  Engines return a tuple or list of nodes from the op's method. In the rule texts ``g``
  is then the tuple of cotangents (``g[1]``: the second output's) and ``y`` the outputs.
* ``rules[i]`` and ``tf_rules[i]`` are VJP ``i`` written out as text, in NumPy and in
  TensorFlow spelling: what `gradcheck ops`, the diagnosis's fixes and the docs show.
  The names in them: ``g`` the cotangent, the parameters (``a``, ``b``, ``x``), ``y``
  the op's output, the attributes; for reductions ``axis`` is the tuple of reduced axes,
  ``kept_shape`` is x's shape with those axes as size 1 and ``n`` the number of elements
  each output summarises; ``summed_axes`` (broadcast_to) the axes broadcasting added or
  stretched; ``sizes``/``offsets`` (concat, split) the pieces' lengths and where they end;
  ``axes`` (dilate, undilate) the tuple of dilated axes, non-negative;
  ``axes_a``/``axes_b`` (tensordot) the contracted axes of a and of b, pairwise, and
  ``free_a``/``free_b`` the others; ``adjoint``, ``others`` and ``fill`` (einsum) operand
  ``i``'s VJP as an einsum: its equation, the other operands, and the identity matrices
  (a repeated index, ``"ii->i"``) and ones (an index only operand ``i`` has) it needs.
  Elementwise rules give the broadcast shape, summed back by `unbroadcast` as the VJPs
  are. broadcast_to's VJP gives it too (so a fault in that one step reaches it as it
  reaches the binary ops), but its text writes the sum out: alone, ``g`` would read as
  an identity. A text may be several ``;``-separated statements ending with an
  expression; the tests evaluate every one against its VJP, so the texts cannot drift
  from the code.
* ``jvp_rules[i]`` and ``tf_jvp_rules[i]`` are JVP ``i`` as text, in the same names with
  ``t`` the argument's tangent; tested the same way.
* ``torch_rules``/``jax_rules`` (and ``torch_jvp_rules``/``jax_jvp_rules``) are the same
  texts in PyTorch and JAX spelling (``torch.``, ``jnp.``, ``jax.``), for the fixes of an
  engine built on them. A builtin op that leaves one out gets the NumPy texts translated
  mechanically (`ops.spelling`: ``np.`` to ``torch.`` or ``jnp.``, torch's ``dim=`` and
  ``keepdim=``), so an op declares only the texts that translation gets wrong; the tests
  evaluate every text, declared or translated, with real tensors of that library. A user
  op gets no translation (nothing tests it): only the texts it declares; where it declares
  none in an engine's spelling, fixes show NumPy's alone.
* ``domain`` maps a parameter's name to the `Interval` its values are kept in when
  ``gradcheck fuzz`` generates cases: inside the op's domain and out of its steep
  regions (``log`` near 0, a denominator near 0, large exponents), where two correct
  engines can differ by more than rounding. Kinks (``kink``) are kept apart the same way
  unless they are what a generated case is after.
* ``tf_wrong(*args, **attrs)``, where TensorFlow's own gradient of the op is known to be
  wrong for some values (cumprod at zeros: it divides by x), says why for these argument
  values, or None; a case that reaches such values is judged by the numeric reference,
  and its report says why (`runner.references`).
* ``conditioned`` names the parameters that are square matrices (in their last two axes)
  an op inverts (inv, det, solve, triangular_solve): ``gradcheck fuzz`` draws a fresh
  input for one diagonally dominant, and keeps a case only where each such argument is
  (rows' diagonal beyond the rest by `DOMINANCE`: invertible and well-conditioned, and
  so is each triangle). ``symmetric`` names the parameters read as symmetric matrices
  (cholesky's: TensorFlow's gradient is the symmetrised one): the numeric reference
  symmetrises them, ``(x + x^T) / 2``, before the forward, so that it perturbs them
  symmetrically, and the fuzzer draws them symmetric and dominant, positive definite.
* An attribute ``dtype`` whose default is None (one_hot's, whose only input is integer)
  is the case's float dtype, filled in when the case is read, so the op's output is in it.
* ``value_rule`` (softmax_cross_entropy's labels) says what some parameters' values must
  be: checked where the case gives them, a case error at the input's line otherwise;
  such a parameter takes only a fresh input in ``gradcheck fuzz``, made to comply.
* The pools' rule texts also name ``ksize``/``strides`` (one per spatial axis), ``spatial``
  (those axes), ``pad_width``, ``strided``, ``unpadded``, ``tf_ksize``/``tf_strides``,
  ``channels``, ``torch_pads`` and ``window_dimensions``/``window_strides``
  (`ops.pooling.pool_names`); the norms' ``axis`` is the tuple of reduced axes.
* The convolutions' PyTorch and JAX texts name ``stride`` and ``dilation`` (one per spatial
  axis), ``pads`` (a ``(before, after)`` pair per spatial axis), ``torch_pads`` (those as
  ``F.pad`` takes them), ``channels`` (x's channel axis), ``filter_axes`` (w's output and
  input channel axes) and conv2d_transpose's ``output_padding`` (`ops.conv.conv_names`).
* ``attr_choices`` maps an attribute to the values ``gradcheck fuzz`` tries for it, where
  its name says nothing the fuzzer knows (``axis``, ``keepdims``, ``perm``, ``shape`` and
  ``index`` it proposes itself): clip's bounds, cumsum's ``exclusive``, norm's ``ord``;
  or a function of the first argument's shape giving them, where they depend on it
  (conv2d_transpose's ``output_shape``). Without it only the default is tried.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

Shape = tuple[int, ...]
VJP = Callable[..., Any]
JVP = Callable[..., Any]


DOMINANCE = 0.5  # a conditioned matrix's |diagonal| exceeds the rest of its row by this


class ShapeError(ValueError):
    """An op cannot be applied to arguments of these shapes, or to these attributes."""


@dataclass(frozen=True)
class Interval:
    """Values in [low, high] that are, when `gap` > 0, at least `gap` away from 0."""

    low: float = -math.inf
    high: float = math.inf
    gap: float = 0.0

    def contains(self, x: Any) -> Any:
        """Whether `x` lies in the interval: a bool, or an elementwise mask for an array."""
        return (self.low <= x) & (x <= self.high) & (abs(x) >= self.gap)


@dataclass(frozen=True)
class ValueRule:
    """What the values of the float parameters `params` must be (softmax_cross_entropy's
    labels sum to 1). ``check(param, values, *arg_shapes, **attrs)`` gives the problem or
    None, ``values`` the numbers flat in C order (None for an input drawn at random);
    ``make(param, values, *arg_shapes, **attrs)`` turns any such numbers into ones that
    pass (the fuzzer's fresh inputs)."""

    params: tuple[str, ...]
    check: Callable[..., str | None]
    make: Callable[..., tuple[float, ...]]


@dataclass(frozen=True)
class Op:
    name: str
    params: tuple[str, ...]
    shape: Callable[..., Shape]
    forward: Callable[..., Any]
    vjps: tuple[VJP, ...] = ()
    tf: Callable[..., Any] | None = None
    tf_name: str | None = None
    doc: str = ""
    attrs: Mapping[str, Any] = field(default_factory=dict)
    operator: str | None = None
    variadic: bool = False
    # Where the op has points at which TensorFlow picks a subgradient (the diagnosis
    # says which convention; ops/conventions.py has the others): "zero" (relu, abs at
    # 0), "tie" (maximum, minimum, max, min), "base" (pow's exponent where a <= 0),
    # "bound" (clip at lo and hi), "window" (max-pools: ties within a window).
    kink: str | None = None
    # A special case at zero that is no kink (prod: the gradient of a product holding a
    # zero, or two): gradcheck fuzz draws whole numbers, zeros exact, a quarter of the time.
    zeros: bool = False
    origin: str | None = None
    rules: tuple[str, ...] = ()  # each VJP as NumPy text (see the module docstring)
    tf_rules: tuple[str, ...] = ()  # ... and as TensorFlow text
    domain: Mapping[str, Interval] = field(default_factory=dict)  # parameter -> its values
    attr_choices: Mapping[str, tuple[Any, ...] | Callable[[Shape], Sequence[Any]]] = field(
        default_factory=dict
    )  # for fuzzing
    tf_wrong: Callable[..., str | None] | None = None  # see the module docstring
    jvps: tuple[JVP, ...] = ()  # forward mode: one per parameter, like the VJPs
    jvp_rules: tuple[str, ...] = ()  # each JVP as NumPy text ...
    tf_jvp_rules: tuple[str, ...] = ()  # ... and as TensorFlow text
    # The VJPs' and JVPs' texts in PyTorch and JAX spelling; left out, a builtin op's are
    # its NumPy texts translated (see the module docstring).
    torch_rules: tuple[str, ...] = ()
    jax_rules: tuple[str, ...] = ()
    torch_jvp_rules: tuple[str, ...] = ()
    jax_jvp_rules: tuple[str, ...] = ()
    # Parameters that take integer inputs (indices, labels; SPEC §3.1): never
    # differentiated, so their VJP and JVP are None and their rule texts "".
    integer: tuple[str, ...] = ()
    # What an integer parameter may hold, from the argument shapes and attributes:
    # (low, high, what) for values in [low, high) ("axis 0 of size 5"); checked when a
    # case is read, so an index out of range is a case error at its input's line.
    index_range: Callable[..., tuple[int, int, str]] | None = None
    # Elements the op holds while it computes, beyond its arguments and output, from the
    # argument shapes and attributes (a convolution's im2col expansion): counted against
    # the case's element caps (`max_elements`) as a node's are, so a small case cannot
    # ask for gigabytes.
    scratch: Callable[..., int] | None = None
    leading: str | None = None  # an attribute written first, operands spread after it
    conditioned: tuple[str, ...] = ()  # parameters that must be well-conditioned matrices
    symmetric: tuple[str, ...] = ()  # parameters read as symmetric matrices (cholesky)
    value_rule: ValueRule | None = None  # what some float parameters' values must be
    # How many outputs the op gives, from the argument shapes and attributes (None: one);
    # see the module docstring.
    outputs: Callable[..., int] | None = None

    def __post_init__(self) -> None:
        for rules, what in ((self.vjps, "VJPs"), (self.jvps, "JVPs")):
            if len(rules) not in (0, self.vjp_count):
                raise TypeError(
                    f"op {self.name}: {len(rules)} {what} for {self.vjp_count} parameters"
                )
        for texts in (
            *(self.rules, self.tf_rules, self.jvp_rules, self.tf_jvp_rules),
            *(self.torch_rules, self.jax_rules, self.torch_jvp_rules, self.jax_jvp_rules),
        ):
            if texts and len(texts) != self.vjp_count:
                raise TypeError(
                    f"op {self.name}: {len(texts)} rule texts for {self.vjp_count} parameters"
                )
        unknown = sorted(set(self.domain) - set(self.params))
        if unknown:
            raise TypeError(f"op {self.name}: domain for unknown parameter {unknown[0]!r}")
        unknown = sorted({*self.conditioned, *self.symmetric} - set(self.params))
        if unknown:
            raise TypeError(f"op {self.name}: matrix declaration for unknown {unknown[0]!r}")
        if self.leading is not None and (not self.variadic or self.leading not in self.attrs):
            raise TypeError(f"op {self.name}: leading needs a variadic op and an attribute")
        unknown = sorted(set(self.attr_choices) - set(self.attrs))
        if unknown:
            raise TypeError(f"op {self.name}: attr_choices for unknown attribute {unknown[0]!r}")
        object.__setattr__(self, "attrs", MappingProxyType(dict(self.attrs)))
        object.__setattr__(self, "domain", MappingProxyType(dict(self.domain)))
        object.__setattr__(self, "attr_choices", MappingProxyType(dict(self.attr_choices)))

    def __call__(self, *args: Any, **attrs: Any) -> Any:
        """The op applied to `args`: its NumPy forward, or, when an argument is a tensor
        that records ops (its type has ``__gradcheck_apply__``: the builtin engine's, in
        ``create_graph`` mode), a node of that tensor's graph. A rule that calls an op
        this way stays differentiable (see the module docstring)."""
        for arg in args[0] if self.variadic else args:
            record = getattr(type(arg), "__gradcheck_apply__", None)
            if record is not None:
                return record(self, list(args), {**self.attrs, **attrs})
        return self.forward(*args, **{**self.attrs, **attrs})

    @property
    def multi(self) -> bool:
        """Whether the op gives several outputs (its `outputs` says how many)."""
        return self.outputs is not None

    @property
    def vjp_count(self) -> int:
        """How many VJPs a complete declaration has: one per parameter (one for a list)."""
        return 1 if self.variadic else len(self.params)

    @property
    def signature(self) -> str:
        if self.leading is not None:  # einsum(equation, *operands)
            rest = [f"{k}={v!r}" for k, v in self.attrs.items() if k != self.leading]
            return f"{self.name}({', '.join([self.leading, f'*{self.params[0]}', *rest])})"
        params = [f"[{p}, ...]" if self.variadic else p for p in self.params]
        attrs = [f"{k}={v!r}" for k, v in self.attrs.items()]
        return f"{self.name}({', '.join(params + attrs)})"

    def rule(self, i: int, spelling: str = "numpy", mode: str = "rev") -> str | None:
        """VJP `i` (`mode` "fwd": JVP `i`) as text, `spelling` "numpy", "tensorflow",
        "torch" or "jax"; None when not declared (nor, for a builtin op's torch and jax
        texts, translated from NumPy's)."""
        fwd = mode == "fwd"
        texts = {
            "numpy": self.jvp_rules if fwd else self.rules,
            "tensorflow": self.tf_jvp_rules if fwd else self.tf_rules,
            "torch": self.torch_jvp_rules if fwd else self.torch_rules,
            "jax": self.jax_jvp_rules if fwd else self.jax_rules,
        }[spelling]
        k = 0 if self.variadic else i
        if texts:
            return texts[k]
        numpy = self.jvp_rules if fwd else self.rules
        if spelling in ("torch", "jax") and numpy and self.origin is None:
            from .spelling import translate  # only when asked: declaring stays cheap

            return translate(numpy[k], spelling)
        return None

    def __reduce__(self) -> tuple[Any, ...]:
        # By name: an op crosses to a worker process whose registry declares it too.
        return get_op, (self.name,)

    def resolve_attrs(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """The op's attributes with defaults filled in; unknown names raise `ShapeError`."""
        unknown = sorted(set(given) - set(self.attrs))
        if unknown:
            allowed = ", ".join(self.attrs) or "none"
            raise ShapeError(f"unknown attribute {unknown[0]!r} (allowed: {allowed})")
        return {**self.attrs, **given}


_REGISTRY: dict[str, Op] = {}


def register(op: Op) -> Op:
    existing = _REGISTRY.get(op.name)
    # The same user declaration met again (its file loaded in a fresh module) replaces itself.
    if existing is not None and (op.origin is None or existing.origin != op.origin):
        raise ValueError(f"op {op.name!r} is declared twice")
    _REGISTRY[op.name] = op
    return op


def get_op(name: str) -> Op:
    """The op called `name`; a `KeyError` with the known names when there is none."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown op {name!r}; known ops: {', '.join(sorted(_REGISTRY))}") from None


def has_op(name: str) -> bool:
    return name in _REGISTRY


def all_ops() -> Iterator[Op]:
    return iter(_REGISTRY.values())


def operator_ops() -> dict[str, Op]:
    """Ops reachable through a Python operator, keyed by the operator's symbol."""
    return {op.operator: op for op in _REGISTRY.values() if op.operator}
