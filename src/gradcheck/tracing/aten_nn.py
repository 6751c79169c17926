"""ATen's linear algebra and nn ops as registry ops (`torch_aten`): products, solvers,
convolutions, pools, norms and losses."""

from __future__ import annotations

from typing import Any

import numpy as np

from .aten_table import ATEN, aten, operand, scaled
from .program import call
from .tables import Emit, need

# -- linear algebra ----------------------------------------------------------------------

for _name in ("mm", "bmm", "matmul"):
    ATEN[_name] = lambda e, a: f"{a['self'].text} @ {a[list(a)[1]].text}"


@aten("addmm", "baddbmm", "addbmm")
def _addmm(e: Emit, a: dict) -> str:
    first, second = (a["mat1"], a["mat2"]) if "mat1" in a else (a["batch1"], a["batch2"])
    product = f"{first.text} @ {second.text}"
    if a["__name__"] == "addbmm":
        product = call("sum", f"{product}", axis=[0])
    bias = a["self"]
    if a["beta"] == 0:
        return scaled(f"({product})", a["alpha"])
    return f"{scaled(bias, a['beta'])} + {scaled(f'({product})', a['alpha'])}"


@aten("mv")
def _mv(e: Emit, a: dict) -> str:
    matrix, vector = a["self"], a["vec"]
    column = call("expand_dims", vector.text, axis=1)
    return call("squeeze", f"{matrix.text} @ {column}", axis=[matrix.ndim - 1])


ATEN["dot"] = lambda e, a: call("dot", a["self"].text, a["tensor"].text)
ATEN["outer"] = lambda e, a: call("outer", a["self"].text, a["vec2"].text)
ATEN["trace"] = lambda e, a: call("trace", a["self"].text)


@aten("diagonal")
def _diagonal(e: Emit, a: dict) -> str:
    x = a["self"]
    dims = (a["dim1"] % x.ndim, a["dim2"] % x.ndim)
    need(a["offset"] == 0 and dims == (x.ndim - 2, x.ndim - 1), "an off-diagonal or other axes")
    return call("diag_part", x.text)


ATEN["linalg_inv_ex"] = lambda e, a: [call("inv", a["A"].text), None]
ATEN["_linalg_det"] = lambda e, a: [call("det", a["A"].text), None, None]


@aten("_linalg_slogdet")
def _slogdet(e: Emit, a: dict) -> list:
    parts = e.bind(call("slogdet", a["A"].text), "slogdet")
    return [f"{parts}[0]", f"{parts}[1]", None, None]


@aten("_linalg_solve_ex")
def _solve(e: Emit, a: dict) -> list:
    matrix, rhs = a["A"], a["B"]
    need(a["left"] and rhs.ndim == matrix.ndim, "a solve from the right, or by a vector")
    return [call("solve", matrix.text, rhs.text), None, None, None]


@aten("linalg_cholesky_ex")
def _cholesky(e: Emit, a: dict) -> list:
    need(not a["upper"], "an upper Cholesky factor")
    return [call("cholesky", a["self"].text), None]


@aten("linalg_solve_triangular")
def _triangular(e: Emit, a: dict) -> str:
    need(a["left"] and not a["unitriangular"], "a unitriangular or right-hand solve")
    return call("triangular_solve", a["self"].text, a["B"].text, lower=not a["upper"])


# -- nn ----------------------------------------------------------------------------------


@aten("convolution")
def _convolution(e: Emit, a: dict) -> str:
    x, w, bias = a["input"], a["weight"], a["bias"]
    rank = x.ndim - 2
    need(rank in (1, 2), f"a {rank}-d convolution")
    data, filters = ("NCW", "OIW") if rank == 1 else ("NCHW", "OIHW")
    strides, dilations = list(a["stride"]), list(a["dilation"])
    pads = [[p, p] for p in a["padding"]]
    if a["transposed"]:
        need(rank == 2 and a["groups"] == 1 and dilations == [1, 1], "this transposed conv")
        w_tf = call("transpose", w.text, perm=[2, 3, 1, 0])  # torch's [in, out, H, W] as TF's
        text = call("conv2d_transpose", x.text, w_tf, output_shape=list(a["__out__"][0]),
                    strides=strides, padding=pads, data_format=data)  # fmt: skip
    else:
        text = call(f"conv{rank}d", x.text, w.text, strides=strides, padding=pads,
                    dilations=dilations, groups=a["groups"], data_format=data,
                    filter_format=filters)  # fmt: skip
    if bias is None:
        return text
    column = call("reshape", operand(bias), shape=[-1] + [1] * rank)
    return f"{text} + {column}"


def _pool_window(a: dict, rank: int) -> tuple[list[int], list[int]]:
    ksize = list(a["kernel_size"]) * (rank if len(a["kernel_size"]) == 1 else 1)
    strides = list(a["stride"]) or ksize
    strides = strides * (rank if len(strides) == 1 else 1)
    return ksize, strides


@aten("max_pool2d_with_indices", "max_pool1d_with_indices")
def _max_pool(e: Emit, a: dict) -> list:
    x = a["self"]
    rank = x.ndim - 2
    need(rank in (1, 2) and not a["ceil_mode"], "a max-pool with ceil_mode")
    need(set(a["padding"]) == {0} and set(a["dilation"]) == {1}, "a padded or dilated max-pool")
    ksize, strides = _pool_window(a, rank)
    data = "NCW" if rank == 1 else "NCHW"
    return [call(f"max_pool{rank}d", x.text, ksize=ksize, strides=strides, data_format=data), None]


@aten("avg_pool2d", "avg_pool1d")
def _avg_pool(e: Emit, a: dict) -> str:
    x = a["self"]
    rank = x.ndim - 2
    need(not a["ceil_mode"] and a.get("divisor_override") is None, "an avg-pool with options")
    need(set(a["padding"]) == {0}, "a padded avg-pool (torch counts the padding)")
    ksize, strides = _pool_window(a, rank)
    data = "NCW" if rank == 1 else "NCHW"
    return call(f"avg_pool{rank}d", x.text, ksize=ksize, strides=strides, data_format=data)


def _affine(text: str, weight: Any, bias: Any, shape: list[int]) -> str:
    if weight is not None:
        text = f"{text} * {call('reshape', weight.text, shape=shape)}"
    if bias is not None:
        text = f"{text} + {call('reshape', bias.text, shape=shape)}"
    return text


@aten("native_layer_norm")
def _layer_norm(e: Emit, a: dict) -> list:
    x = a["input"]
    count = len(a["normalized_shape"])
    axes = list(range(x.ndim - count, x.ndim))
    text = call("layer_norm", x.text, axis=axes, epsilon=float(a["eps"]))
    return [_affine(text, a["weight"], a["bias"], list(x.shape[-count:])), None, None]


@aten("native_batch_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_no_training")
def _batch_norm(e: Emit, a: dict) -> list:
    x = a["input"]
    need(a.get("training", False), "batch norm in eval mode (running statistics)")
    shape = [1, -1] + [1] * (x.ndim - 2)
    axes = [0, *range(2, x.ndim)]
    text = call("batch_norm", x.text, axis=axes, epsilon=float(a["eps"]))
    return [_affine(text, a["weight"], a["bias"], shape), None, None]


_REDUCTIONS = {0: None, 1: "mean", 2: "sum"}


def _reduced(text: str, reduction: int) -> str:
    how = _REDUCTIONS[reduction]
    return text if how is None else call(how, text)


@aten("nll_loss_forward")
def _nll_loss(e: Emit, a: dict) -> list:
    logp, target = a["self"], a["target"]
    ignored = (target.value == a["ignore_index"]).any()
    need(logp.ndim == 2 and a["weight"] is None and not ignored, "this nll_loss")
    # the targets one-hot, a constant: a product and a sum, which TensorFlow differentiates
    # far faster than a gather
    target_ids = target.value.detach().numpy().astype(np.int64)
    hot = np.eye(logp.shape[1])[target_ids]
    labels = e.constant(hot, "labels", False)
    picked = call("sum", f"{logp.text} * {labels}", axis=[1])
    return [f"-{_reduced(picked, a['reduction'])}", None]


@aten("mse_loss")
def _mse_loss(e: Emit, a: dict) -> str:
    return _reduced(call("square", f"{a['self'].text} - {a['target'].text}"), a["reduction"])


@aten("binary_cross_entropy_with_logits")
def _bce_logits(e: Emit, a: dict) -> str:
    need(a["weight"] is None and a["pos_weight"] is None, "a weighted binary cross-entropy")
    x, t = a["self"].text, operand(a["target"])
    return _reduced(f"{call('softplus', x)} - {x} * {t}", a["reduction"])
