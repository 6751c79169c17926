"""Every VJP's and JVP's rule text (NumPy and TensorFlow spelling) computes what it says.

The texts are what `gradcheck ops`, the diagnosis's fixes and the docs show; here each
is evaluated as written, in the names the registry's docstring defines, on random
inputs for every op, and compared with the registry's own VJP (summed back to the
argument's shape, as the builtin engine does). A text that drifts from its code fails.
"""

from __future__ import annotations

import numpy as np
import pytest

from gradcheck.ops import all_ops, get_op, unbroadcast
from gradcheck.ops.broadcast import normalize_axes
from gradcheck.ops.contractions import einsum_adjoint, fill_arrays, tensordot_axes
from gradcheck.ops.conv import RULE_NAMES, conv_names
from gradcheck.ops.pooling import pool_names
from gradcheck.ops.reductions import reduced_size
from gradcheck.ops.shape import _perm
from gradcheck.ops.splits import split_sizes
from gradcheck.references.tensorflow import load_tensorflow

POOLS = ("max_pool2d", "avg_pool2d", "max_pool1d", "avg_pool1d")
CONVS = ("conv1d", "conv2d", "conv2d_transpose")

# One application per op: arguments (shapes, or values) and attributes.
# fmt: off
APPLICATIONS: dict[str, list[tuple[list, dict]]] = {
    "add": [([(2, 3), (3,)], {})], "sub": [([(2, 3), (2, 1)], {})],
    "mul": [([(2, 3), (3,)], {})], "div": [([(2, 3), "positive(3,)"], {})],
    "pow": [(["positive(2, 3)", (3,)], {}), ([[-2.0, 0.0, 2.0], [2.0, 3.0, 2.0]], {})],
    "maximum": [([[1.0, 2.0, 3.0], [1.0, 5.0, 0.0]], {})],
    "minimum": [([[1.0, 2.0, 3.0], [1.0, 5.0, 0.0]], {})],
    "neg": [([(2, 3)], {})], "exp": [([(2, 3)], {})], "log": [(["positive(2, 3)"], {})],
    "sqrt": [(["positive(2, 3)"], {})], "abs": [([[-1.0, 0.0, 2.0]], {})],
    "square": [([(2, 3)], {})], "sin": [([(2, 3)], {})], "cos": [([(2, 3)], {})],
    "tanh": [([(2, 3)], {})], "sigmoid": [([(2, 3)], {})], "relu": [([[-1.0, 0.0, 2.0]], {})],
    "matmul": [([(2, 3, 4), (4, 5)], {}), ([(3, 4), (2, 4, 5)], {})],
    "dot": [([(4,), (4,)], {})], "outer": [([(3,), (2,)], {})],
    "trace": [([(2, 3, 4)], {}), ([(4, 2)], {})],
    "diag_part": [([(2, 3, 4)], {}), ([(4, 2)], {})],
    "sum": [([(2, 3, 4)], {"axis": [0, 2], "keepdims": False}),
            ([(2, 3)], {"axis": None, "keepdims": True})],
    "mean": [([(2, 3, 4)], {"axis": 1, "keepdims": False})],
    "max": [([[[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]]], {"axis": 1, "keepdims": False})],
    "min": [([[[1.0, 1.0, 3.0], [2.0, 0.0, 0.0]]], {"axis": -1, "keepdims": True})],
    "logsumexp": [([(2, 3)], {"axis": 0, "keepdims": False})],
    "reshape": [([(2, 3)], {"shape": [3, 2]})],
    "flip": [([(2, 3, 4)], {"axis": [0, 2]}), ([(2, 3)], {"axis": -1})],
    "swapaxes": [([(2, 3, 4)], {"axis1": 0, "axis2": -1})],
    # ops/layout.py
    "pad": [([(2, 3)], {"paddings": [[1, 0], [2, 2]], "mode": "reflect", "constant_values": 0}),
            ([(3, 2)], {"paddings": [[3, 1], [0, 2]], "mode": "symmetric", "constant_values": 0}),
            ([(2, 3)], {"paddings": [[0, 2], [1, 0]], "mode": "constant", "constant_values": 1.5})],
    "tile": [([(2, 3)], {"reps": [2, 3]}), ([(3,)], {"reps": [1]})],
    "repeat": [([(2, 3)], {"repeats": [2, 0, 1], "axis": -1}),
               ([(2, 3)], {"repeats": 2, "axis": None}), ([(2, 3)], {"repeats": 3, "axis": 0})],
    "roll": [([(2, 3, 4)], {"shift": [1, -2], "axis": [0, 2]}),
             ([(2, 3)], {"shift": 4, "axis": None}), ([(4,)], {"shift": -1, "axis": 0})],
    "dilate": [([(2, 3)], {"axes": [0, -1], "dilation": 1}),
               ([(2, 3)], {"axes": 1, "dilation": 2})],
    "undilate": [([(5, 3)], {"axes": [0, 1], "dilation": 1}),
                 ([(2, 7)], {"axes": -1, "dilation": 2})],
    "transpose": [([(2, 3, 4)], {"perm": [1, 2, 0]}), ([(2, 3)], {"perm": None})],
    "matrix_transpose": [([(2, 3, 4)], {})],
    "expand_dims": [([(2, 3)], {"axis": 1})], "squeeze": [([(2, 1, 3)], {"axis": None})],
    "broadcast_to": [([(3, 1)], {"shape": [2, 3, 4]})],
    "concat": [([[(2, 3), (2, 1), (2, 2)]], {"axis": 1})],
    "stack": [([[(2, 3), (2, 3)]], {"axis": 1})],
    "split": [([(6, 2)], {"num_or_sizes": 3, "axis": 0}),
              ([(2, 6)], {"num_or_sizes": [1, 3, -1], "axis": -1})],
    "unstack": [([(3, 2)], {"axis": 0}), ([(2, 3, 2)], {"axis": 1})],
    "getitem": [([(3, 4, 5)], {"index": (1, slice(None, 3), None, Ellipsis)})],
    "softmax": [([(2, 4)], {"axis": -1})], "log_softmax": [([(2, 4)], {"axis": 0})],
    **{name: [([(2, 3), (3,)], {})] for name in (
        "greater", "greater_equal", "less", "less_equal", "equal", "not_equal")},
    "where": [([[[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]], (2, 3), (3,)], {})],
    "clip": [([[-2.0, -1.0, 0.5, 1.5, 3.0]], {"lo": -1.0, "hi": 1.5})],
    "take": [([(5, 3), "ints[0, 2, 2, 4]"], {"axis": 0}),
             ([(2, 4, 3), "ints[[3, 0], [3, 3]]"], {"axis": 1})],
    "take_along_axis": [([(3, 4), "ints[[0, 0, 1], [3, 3, 3], [2, 1, 0]]"], {"axis": 1}),
                        ([(3, 2), "ints[[2, 2], [0, 2]]"], {"axis": 0})],
    "embedding": [([(5, 3), "ints[[4, 0], [4, 4]]"], {})],
    "sparse_softmax_cross_entropy": [([(3, 4), "ints[0, 3, 3]"], {})],
    # ops/unary.py
    "log1p": [(["positive(2, 3)"], {})], "expm1": [([(2, 3)], {})],
    "reciprocal": [(["positive(2, 3)"], {})], "rsqrt": [(["positive(2, 3)"], {})],
    "tan": [([(2, 3)], {})], "erf": [([(2, 3)], {})], "softplus": [([(2, 3)], {})],
    "gelu": [([(2, 3)], {"approximate": False}), ([(2, 3)], {"approximate": True})],
    "leaky_relu": [([[-1.0, 0.0, 2.0]], {"alpha": 0.2})],
    "elu": [([[-1.0, 0.0, 2.0]], {"alpha": 0.5})], "selu": [([[-1.0, 0.0, 2.0]], {})],
    "silu": [([(2, 3)], {})], "sign": [([(2, 3)], {})], "floor": [([(2, 3)], {})],
    "ceil": [([(2, 3)], {})], "round": [([(2, 3)], {})],
    # ops/cumulative.py, ops/statistics.py
    "prod": [([(2, 3, 4)], {"axis": [0, 2], "keepdims": False}),
             ([[[1.0, 0.0, 2.0], [0.0, 0.0, 3.0]]], {"axis": 1, "keepdims": True}),
             ([(2, 3)], {"axis": None, "keepdims": False})],
    "cumsum": [([(3, 4)], {"axis": 1, "exclusive": True, "reverse": False}),
               ([(3, 4)], {"axis": 0, "exclusive": False, "reverse": True})],
    "cumprod": [([[[1.0, 0.0, 2.0, 0.0], [2.0, 3.0, 0.5, 1.5]]],
                 {"axis": 1, "exclusive": False, "reverse": False}),
                ([[[1.0, 0.0, 2.0, 0.0], [2.0, 0.0, 0.5, 1.5]]],
                 {"axis": 1, "exclusive": True, "reverse": True}),
                ([(3, 4)], {"axis": 0, "exclusive": True, "reverse": False})],
    # ops/conv.py: TF spellings in NHWC, undilated, ungrouped (TF's CPU kernels' reach); the
    # others for the formats, per-axis strides and dilations, int and uneven explicit pads
    "conv2d": [([(2, 5, 5, 3), (3, 3, 3, 4)], {"strides": 2, "padding": "SAME"}),
               ([(1, 4, 6, 6), (4, 2, 3, 3)], {"padding": "VALID", "groups": 2,
                "data_format": "NCHW", "filter_format": "OIHW"}, "numpy"),
               ([(2, 6, 5, 4), (6, 2, 3, 2)], {"strides": [2, 1], "padding": [[0, 2], [1, 0]],
                "dilations": [1, 2], "groups": 2, "filter_format": "OIHW"}, "numpy"),
               ([(1, 3, 6, 5), (3, 3, 3, 2)], {"strides": 2, "padding": "SAME", "dilations": 2,
                "data_format": "NCHW"}, "numpy"),
               ([(2, 4, 4, 2), (2, 2, 2, 3)], {"strides": 2, "padding": 1}, "numpy")],
    "conv1d": [([(2, 7, 3), (2, 3, 4)], {"strides": 2, "padding": "SAME"}),
               ([(1, 9, 2), (3, 2, 2)], {"padding": "VALID", "dilations": 2}, "numpy"),
               ([(2, 4, 9), (4, 2, 3)], {"strides": 2, "padding": "SAME", "groups": 2,
                "data_format": "NCW", "filter_format": "OIW"}, "numpy"),
               ([(1, 8, 3), (2, 3, 3)], {"padding": [[2, 1]], "dilations": 3}, "numpy")],
    "conv2d_transpose": [([(2, 3, 3, 4), (3, 3, 2, 4)], {"output_shape": [2, 6, 6, 2],
                          "strides": 2, "padding": "SAME"}),
                         ([(2, 4, 3, 3), (3, 2, 2, 4)], {"output_shape": [2, 2, 8, 7],
                          "strides": 2, "padding": "VALID", "data_format": "NCHW"}, "numpy"),
                         ([(1, 3, 3, 2), (2, 3, 1, 2)], {"output_shape": [1, 5, 3, 1],
                          "strides": [2, 1], "padding": "SAME"}, "numpy")],
    # ops/pooling.py, ops/normalization.py, one_hot
    "max_pool2d": [([[[[[1.0], [3.0], [3.0]], [[3.0], [0.0], [1.0]], [[2.0], [2.0], [5.0]]]]],
                    {"ksize": 2, "strides": 1, "padding": "VALID", "data_format": "NHWC"}),
                   ([(2, 5, 4, 3)], {"ksize": [3, 2], "strides": 2, "padding": "SAME",
                                     "data_format": "NHWC"}),
                   # channels first, ties in overlapping windows, SAME's odd pad after
                   ([[[[[1.0, 2.0, 2.0], [2.0, 0.0, 2.0], [1.0, 2.0, 1.0], [0.0, 0.0, 0.0]],
                       [[3.0, 3.0, 1.0], [3.0, 3.0, 3.0], [0.0, 1.0, 1.0], [1.0, 0.0, 1.0]]]]],
                    {"ksize": [3, 2], "strides": [1, 2], "padding": "SAME",
                     "data_format": "NCHW"}, "numpy")],
    "avg_pool2d": [([(2, 5, 4, 3)], {"ksize": 3, "strides": [2, 1], "padding": "SAME",
                                     "data_format": "NHWC"}),
                   ([(1, 4, 4, 2)], {"ksize": 2, "strides": None, "padding": "VALID",
                                     "data_format": "NHWC"}),
                   ([(2, 3, 5, 4)], {"ksize": [2, 3], "strides": [1, 2], "padding": "SAME",
                                     "data_format": "NCHW"}, "numpy")],
    "max_pool1d": [([[[[1.0], [1.0], [2.0], [2.0], [0.0]]]],
                    {"ksize": 2, "strides": 1, "padding": "SAME", "data_format": "NWC"}),
                   ([(2, 7, 3)], {"ksize": 3, "strides": 2, "padding": "VALID",
                                  "data_format": "NWC"}),
                   ([[[[1.0, 1.0, 0.0, 2.0, 2.0, 2.0, 1.0], [0.0, 3.0, 3.0, 0.0, 3.0, 1.0, 1.0]]]],
                    {"ksize": 4, "strides": 1, "padding": "SAME", "data_format": "NCW"}, "numpy")],
    "avg_pool1d": [([(2, 7, 3)], {"ksize": 4, "strides": 2, "padding": "SAME",
                                  "data_format": "NWC"}),
                   ([(2, 3, 6)], {"ksize": 4, "strides": 1, "padding": "SAME",
                                  "data_format": "NCW"}, "numpy")],
    "layer_norm": [([(3, 5)], {"axis": -1, "epsilon": 1e-5}),
                   ([(2, 3, 4)], {"axis": [1, 2], "epsilon": 1e-3})],
    "batch_norm": [([(2, 3, 3, 2)], {"axis": [0, 1, 2], "epsilon": 1e-5})],
    "softmax_cross_entropy": [([(3, 4), "probabilities(3, 4)"], {"axis": -1}),
                              ([(3, 2), "probabilities0(3, 2)"], {"axis": 0})],
    "one_hot": [(["ints[0, 2, 2]"], {"depth": 3, "dtype": "float64"})],
    "var": [([(2, 3, 4)], {"axis": 1, "keepdims": False})],
    "std": [([(2, 3, 4)], {"axis": [0, 2], "keepdims": True})],
    "norm": [([(2, 3)], {"ord": 2, "axis": None, "keepdims": False}),
             ([(2, 3)], {"ord": 1, "axis": 1, "keepdims": False}),
             ([[[1.0, -3.0, 3.0], [2.0, 0.5, -1.0]]], {"ord": "inf", "axis": -1, "keepdims": True}),
             ([(2, 3, 4)], {"ord": "fro", "axis": [0, 2], "keepdims": False})],
    # ops/contractions.py, ops/solvers.py
    "tensordot": [([(2, 3, 4), (4, 3, 5)], {"axes": [[2, 1], [0, 1]]}),
                  ([(2, 3), (3, 4)], {"axes": 1}), ([(2,), (3, 2)], {"axes": 0})],
    "einsum": [([[(3, 4), (4, 2)]], {"equation": "ij,jk->ki"}),
               ([[(3, 3), (3, 2)]], {"equation": "ii,ij->j"}),
               ([[(3, 3, 2), (4,)]], {"equation": "iij,k->jk"}), ([[(3, 3)]], {"equation": "ii"})],
    "inv": [(["dominant(2, 3, 3)"], {})], "det": [(["dominant(2, 3, 3)"], {})],
    "slogdet": [(["dominant(2, 3, 3)"], {}), ([[[0.5, 1.0], [2.0, 1.0]]], {})],
    "solve": [(["dominant(2, 3, 3)", (2, 3, 2)], {})],
    "cholesky": [(["spd(2, 3, 3)"], {})],
    "triangular_solve": [(["dominant(2, 3, 3)", (3, 2)], {"lower": True}),
                         (["dominant(3, 3)", (2, 3, 1)], {"lower": False})],
}
# fmt: on


def value(spec, rng: np.random.Generator) -> np.ndarray:
    if isinstance(spec, str) and spec.startswith("ints"):  # an integer argument: indices
        return np.array(eval(spec.removeprefix("ints")), dtype=np.int64)
    if isinstance(spec, str) and spec.startswith(("dominant", "spd")):  # well-conditioned
        shape = eval(spec.removeprefix("dominant").removeprefix("spd"))
        m = rng.standard_normal(shape)
        if spec.startswith("spd"):
            return m @ np.swapaxes(m, -1, -2) + shape[-1] * np.eye(shape[-1])
        return m + (shape[-1] + 1) * np.eye(shape[-1])
    if isinstance(spec, str) and spec.startswith("probabilities"):  # soft labels, summing
        axis = 0 if spec.startswith("probabilities0") else -1  # to 1 along the op's axis
        p = rng.uniform(0.1, 1.0, eval(spec.removeprefix("probabilities").removeprefix("0")))
        return p / p.sum(axis=axis, keepdims=True)
    if isinstance(spec, str):  # "positive(2, 3)"
        shape = eval(spec.removeprefix("positive"))
        return rng.uniform(0.5, 2.0, shape)
    if isinstance(spec, tuple):
        return rng.standard_normal(spec)
    return np.array(spec, dtype=np.float64)


def names(op, g, y, args, attrs, i) -> dict:
    """The names a rule text may use (the registry's docstring lists them)."""
    # The ops by name, for what NumPy has no function for (erf, cumsum with exclusive).
    out = {**{o.name: o for o in all_ops()}, **RULE_NAMES, "g": g, "y": y, **attrs}
    if op.variadic:
        out["values"] = out[op.params[0]] = args
        out["i"] = i
    if "axis" in attrs and op.variadic:  # concat, stack
        sizes = [v.shape[attrs["axis"]] for v in args]
        out["sizes"], out["offsets"] = sizes, list(np.cumsum(sizes)[:-1])
    if op.name == "split":  # the pieces' lengths and where they end
        sizes = split_sizes(args[0].shape, attrs["num_or_sizes"], attrs["axis"])
        out["sizes"], out["offsets"] = sizes, list(np.cumsum(sizes)[:-1])
    if not op.variadic:
        out.update(zip(op.params, args, strict=True))
    if op.name == "tensordot":
        a, b = args
        out["axes_a"], out["axes_b"] = tensordot_axes(attrs["axes"], a.ndim, b.ndim)
        out["free_a"] = [k for k in range(a.ndim) if k not in out["axes_a"]]
        out["free_b"] = [k for k in range(b.ndim) if k not in out["axes_b"]]
    if op.name == "einsum":
        adjoint, others, fill = einsum_adjoint(attrs["equation"], [v.shape for v in args], i)
        out["adjoint"], out["others"] = adjoint, [args[k] for k in others]
        out["fill"] = fill_arrays(fill, np.float64)
    if "keepdims" in attrs:  # a reduction
        x = args[0]
        axes = normalize_axes(attrs["axis"], x.ndim)
        out["axis"] = axes
        out["kept_shape"] = tuple(1 if a in axes else d for a, d in enumerate(x.shape))
        out["n"] = reduced_size(x.shape, attrs["axis"])
    if op.name in POOLS:  # the windows: ksize, strides, pads (ops.pooling.pool_names)
        rank = int(op.name[-2])
        out.update(pool_names(args[0], **{k: attrs[k] for k in op.attrs}, rank=rank))
    if op.name in CONVS:  # strides, pads and layouts as PyTorch and JAX take them
        out.update(conv_names(op.name, *args, **attrs))
    if op.name in ("layer_norm", "batch_norm"):
        out["axis"] = normalize_axes(attrs["axis"], args[0].ndim)
    if op.name == "transpose":
        out["perm"] = _perm(attrs["perm"], args[0].ndim)
    if op.name in ("dilate", "undilate"):
        out["axes"] = normalize_axes(attrs["axes"], args[0].ndim)
    if op.name == "broadcast_to":
        x, lead = args[0], len(attrs["shape"]) - args[0].ndim
        target = attrs["shape"]
        stretched = [lead + a for a, d in enumerate(x.shape) if d == 1 and target[lead + a] != 1]
        out["summed_axes"] = (*range(lead), *stretched)
    return out


def _tf_value(tf, value):
    """A name's value in TensorFlow: arrays, and lists of arrays (a variadic op's
    operands, einsum's others and fill), as tensors; anything else as it is."""
    if isinstance(value, np.ndarray):
        return tf.constant(value)
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, np.ndarray) for v in value):
        return [tf.constant(v) for v in value]  # a list, or an op's several outputs or cotangents
    return value


def evaluate(text: str, namespace: dict):
    *statements, last = [s.strip() for s in text.split(";")]
    for statement in statements:
        exec(statement, namespace)
    return eval(last, namespace)


def applications(tensorflow: bool = False):
    """(op, application, argument) triples; with `tensorflow`, those TF's CPU kernels can
    compute (an application marked "numpy", e.g. a grouped NCHW convolution, is left out)."""
    for op in all_ops():
        for k, (args, _attrs, *only) in enumerate(APPLICATIONS[op.name]):
            if tensorflow and only == ["numpy"]:
                continue
            for i in range(len(args[0]) if op.variadic else len(op.params)):
                if not op.variadic and op.params[i] in op.integer:
                    continue  # indices and labels have no gradient, nor a rule
                yield pytest.param(op.name, k, i, id=f"{op.name}-{k}-arg{i}")


def test_every_op_declares_both_spellings_and_has_an_application():
    for op in all_ops():
        assert op.rules and op.tf_rules, op.name
        assert declared(op.rules, op) and declared(op.tf_rules, op), op.name
        assert op.name in APPLICATIONS, op.name


def declared(texts, op) -> bool:
    """A text for each differentiable parameter, none ("") for an integer one (indices)."""
    return [bool(t) for t in texts] == [p not in op.integer for p in op.params]


def setup(name: str, k: int):
    op = get_op(name)
    specs, given = APPLICATIONS[name][k][:2]
    attrs = op.resolve_attrs(given)  # the defaults too: the texts name every attribute
    rng = np.random.default_rng([len(name), k])
    args = [value(s, rng) for s in (specs[0] if op.variadic else specs)]
    y = op.forward(args, **attrs) if op.variadic else op.forward(*args, **attrs)
    if op.multi:  # several outputs (split): y the tuple of them, g a cotangent each
        y = tuple(map(np.asarray, y))
        return op, args, attrs, y, tuple(rng.standard_normal(v.shape) for v in y)
    g = rng.standard_normal(np.shape(y))
    return op, args, attrs, np.asarray(y), g


def want(op, args, attrs, y, g, i) -> np.ndarray:
    rule = op.vjps[0] if op.variadic else op.vjps[i]
    with np.errstate(all="ignore"):
        got = rule(g, y, args, i, **attrs) if op.variadic else rule(g, y, *args, **attrs)
    return unbroadcast(got, args[i].shape)


@pytest.mark.parametrize(("name", "k", "i"), list(applications()))
def test_the_numpy_text_computes_the_vjp(name, k, i):
    op, args, attrs, y, g = setup(name, k)
    namespace = {"np": np, **names(op, g, y, args, attrs, i)}
    with np.errstate(all="ignore"):
        got = np.asarray(evaluate(op.rule(i), namespace), dtype=np.float64)
    expected = want(op, args, attrs, y, g, i)
    np.testing.assert_allclose(unbroadcast(got, args[i].shape), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(("name", "k", "i"), list(applications(tensorflow=True)))
def test_the_tensorflow_text_computes_the_vjp(name, k, i):
    tf = load_tensorflow()
    op, args, attrs, y, g = setup(name, k)
    tensors = {key: _tf_value(tf, v) for key, v in names(op, g, y, args, attrs, i).items()}
    got = np.asarray(evaluate(op.rule(i, "tensorflow"), {"tf": tf, **tensors}), np.float64)
    np.testing.assert_allclose(
        unbroadcast(got, args[i].shape), want(op, args, attrs, y, g, i), rtol=1e-12, atol=1e-12
    )


# -- the JVPs' texts ---------------------------------------------------------------------


def test_every_op_declares_both_spellings_of_its_jvps():
    for op in all_ops():
        assert op.jvps and op.jvp_rules and op.tf_jvp_rules, op.name
        assert declared(op.jvp_rules, op) and declared(op.tf_jvp_rules, op), op.name


def jvp_setup(name: str, k: int, i: int):
    """What a JVP text is evaluated on: `names` with `t`, argument i's tangent."""
    op, args, attrs, y, g = setup(name, k)
    t = np.random.default_rng([len(name), k, i]).standard_normal(args[i].shape)
    rule = op.jvps[0] if op.variadic else op.jvps[i]
    with np.errstate(all="ignore"):
        raw = rule(t, y, args, i, **attrs) if op.variadic else rule(t, y, *args, **attrs)
    if op.multi:  # a tangent per output
        expected = tuple(np.broadcast_to(r, v.shape) for r, v in zip(raw, y, strict=True))
    else:
        expected = np.broadcast_to(raw, y.shape)  # as the builtin engine broadcasts it
    return op, {**names(op, g, y, args, attrs, i), "t": t}, args, expected


def assert_tangents(got, expected) -> None:
    """A JVP text's value against the JVP's, output by output for an op with several."""
    if isinstance(expected, tuple):
        assert len(got) == len(expected)
        for one, want_one in zip(got, expected, strict=True):
            assert_tangents(one, want_one)
        return
    got = np.asarray(got, np.float64)
    np.testing.assert_allclose(np.broadcast_to(got, expected.shape), expected, 1e-12, 1e-12)


@pytest.mark.parametrize(("name", "k", "i"), list(applications()))
def test_the_numpy_text_computes_the_jvp(name, k, i):
    op, namespace, _, expected = jvp_setup(name, k, i)
    with np.errstate(all="ignore"):
        got = evaluate(op.rule(i, mode="fwd"), {"np": np, **namespace})
    assert_tangents(got, expected)


@pytest.mark.parametrize(("name", "k", "i"), list(applications(tensorflow=True)))
def test_the_tensorflow_text_computes_the_jvp(name, k, i):
    tf = load_tensorflow()
    op, namespace, _, expected = jvp_setup(name, k, i)
    tensors = {key: _tf_value(tf, v) for key, v in namespace.items()}
    got = evaluate(op.rule(i, "tensorflow", "fwd"), {"tf": tf, **tensors})
    got = tuple(map(np.asarray, got)) if isinstance(expected, tuple) else np.asarray(got)
    assert_tangents(got, expected)
