"""The fault catalogue: known autodiff bugs, each a small named change to the builtin engine.

A `Fault` replaces one VJP rule, the unbroadcast step of some ops, or the backward
driver (`faults.FaultyEngine` switches one on); a forward-mode fault (``check="jvp"``)
replaces JVP rules or the step that broadcasts a tangent to the output's shape. Each
entry says the bug in one sentence and the fix in one line, with the code to write;
`seen` points at a public bug report of that class, where one is known (owner/repo#number).
What an entry is, and the wrong rules too long for a lambda here, are in `fault_rules.py`.
"""

from __future__ import annotations

from operator import ge, le

import numpy as np

from ...ops import all_ops, get_op
from ...ops.reductions import spread
from .rules import (
    Fault,
    all_ties,
    concat_first_axis,
    leading_kept,
    leading_only,
    mask_without_g,
    no_reduce,
    ties_without_g,
    vjp_as_jvp,
)

BINARY_ELEMENTWISE = frozenset({"add", "sub", "mul", "div", "pow", "maximum", "minimum"})
# The ops whose VJPs give the broadcast shape for the shared unbroadcast to sum back.
BROADCASTING = BINARY_ELEMENTWISE | {"broadcast_to"}
UNBROADCAST = "`g.sum(axis=tuple(range(g.ndim - a.ndim)))`, then `.sum(axis=ones, keepdims=True)`"

# fmt: off
CATALOGUE: tuple[Fault, ...] = (
    Fault(
        "matmul.full-transpose",
        "matmul's VJP transposes the other operand with a full transpose (tf.transpose "
        "without perm reverses every axis) where a batched matmul must swap only the last two",
        "swap only the last two axes: `tf.linalg.matrix_transpose(b)`, or "
        "`tf.matmul(g, b, transpose_b=True)`",
        vjps={
            ("matmul", 0): lambda g, ans, a, b: g @ np.transpose(b),
            ("matmul", 1): lambda g, ans, a, b: np.transpose(a) @ g,
        },
        seen="the question gradcheck grew from (cases/seed.yaml, examples/seed_engine.py)",
    ),
    Fault(
        "matmul.no-batch-reduce",
        "matmul's gradient for an operand whose batch axes were broadcast is not summed "
        "back over those axes",
        f"sum the gradient over the broadcast batch axes: {UNBROADCAST}",
        reduce=no_reduce,
        reduce_ops=frozenset({"matmul"}),
        seen="flashlight/flashlight#760",
    ),
    Fault(
        "matmul.untransposed",
        "matmul's VJP multiplies by the other operand as it is, g @ b and a @ g, without "
        "transposing it",
        "transpose the other operand's last two axes: `g @ np.swapaxes(b, -1, -2)` and "
        "`np.swapaxes(a, -1, -2) @ g`",
        vjps={
            ("matmul", 0): lambda g, ans, a, b: g @ b,
            ("matmul", 1): lambda g, ans, a, b: a @ g,
        },
        seen="tile-ai/TileOPs#54",
    ),
    Fault(
        "broadcast.no-reduce",
        "gradients of broadcasting ops are not summed back to the argument's shape",
        f"unbroadcast: sum over the extra leading axes and, keeping them, over the axes "
        f"where the argument had size 1: {UNBROADCAST}",
        reduce=no_reduce,
        reduce_ops=BROADCASTING,
        seen="deeplearning4j/nd4j#2424",
    ),
    Fault(
        "broadcast.leading-only",
        "unbroadcast sums over the extra leading axes but not over the axes where the "
        "argument had size 1",
        "also sum over every axis where the argument had size 1: "
        "`g.sum(axis=ones, keepdims=True)`",
        reduce=leading_only,
        reduce_ops=BROADCASTING | {"matmul"},
        seen="the question gradcheck grew from (cases/seed.yaml, examples/seed_engine.py)",
    ),
    Fault(
        "broadcast.leading-kept",
        "unbroadcast sums over the broadcast axes with keepdims=True everywhere, so the "
        "extra leading axes stay, as size 1, in the gradient's shape",
        "sum the extra leading axes without keepdims: "
        "`g.sum(axis=tuple(range(g.ndim - a.ndim)))`, keepdims only for size-1 axes",
        reduce=leading_kept,
        reduce_ops=BROADCASTING | {"matmul"},
        seen="deeplearning4j/nd4j#2424",
    ),
    Fault(
        "mul.self",
        "mul's VJP multiplies the upstream gradient by the argument itself instead of "
        "by the other operand",
        "d(a*b)/da is b: `g * b` for a and `g * a` for b",
        vjps={("mul", 0): lambda g, ans, a, b: g * a},
    ),
    Fault(
        "sub.sign",
        "sub's VJP for the second operand keeps the sign: it must be negated",
        "return `-g` for b in a - b",
        vjps={("sub", 1): lambda g, ans, a, b: g},
    ),
    Fault(
        "div.sign",
        "div's VJP for the denominator lost its minus sign",
        "d(a/b)/db is -a / b**2: `-g * a / b**2`",
        vjps={("div", 1): lambda g, ans, a, b: g * a / (b * b)},
    ),
    Fault(
        "div.square",
        "div's VJP for the denominator divides by b instead of b**2",
        "d(a/b)/db is -a / b**2: `-g * a / b**2`",
        vjps={("div", 1): lambda g, ans, a, b: -g * a / b},
    ),
    Fault(
        "div.numerator-self",
        "div's VJP for the numerator divides by the numerator a instead of the denominator b",
        "d(a/b)/da is 1/b: `g / b`",
        vjps={("div", 0): lambda g, ans, a, b: g / a},
        seen="apache/singa#484",
    ),
    Fault(
        "pow.exponent",
        "pow's VJP for the base keeps the exponent: it uses b * a**b instead of b * a**(b-1)",
        "d(a**b)/da is b * a**(b - 1): `g * b * a**(b - 1)`",
        vjps={("pow", 0): lambda g, ans, a, b: g * b * np.power(a, b)},
    ),
    Fault(
        "pow.divides-by-base",
        "pow's VJP for the base is computed as b * y / a from the output y, which is 0/0 = "
        "NaN where a == 0",
        "compute it without dividing by a: `g * b * a**(b - 1)`",
        vjps={("pow", 0): lambda g, ans, a, b: g * b * ans / a},
        seen="tinygrad/tinygrad#9075",
    ),
    Fault(
        "pow.power-rule-exponent",
        "pow's VJP for the exponent uses the power rule, a * b**(a - 1) as if b were the "
        "base, instead of the exponential rule a**b * log(a)",
        "d(a**b)/db is a**b * log(a): `g * a**b * np.log(a)` (0 where a <= 0)",
        vjps={("pow", 1): lambda g, ans, a, b: g * a * np.power(b, a - 1)},
        seen="tenstorrent/tt-metal#52144",
    ),
    Fault(
        "maximum.mask-only",
        "maximum/minimum's VJP returns the winner mask alone: the upstream gradient g is "
        "never multiplied in",
        "multiply the mask by g: `g * (a >= b)` for a (`g * (a <= b)` for minimum)",
        vjps={
            ("maximum", 0): mask_without_g(ge, True), ("maximum", 1): mask_without_g(ge, False),
            ("minimum", 0): mask_without_g(le, True), ("minimum", 1): mask_without_g(le, False),
        },
        seen="apache/singa#510",
    ),
    Fault(
        "maximum.inverted",
        "maximum/minimum's VJP gives the gradient to the argument that lost the comparison",
        "the winner gets g: `g * (a >= b)` for a and `g * ~(a >= b)` for b in maximum",
        vjps={
            ("maximum", 0): lambda g, ans, a, b: g * ~(a >= b),
            ("maximum", 1): lambda g, ans, a, b: g * (a >= b),
            ("minimum", 0): lambda g, ans, a, b: g * ~(a <= b),
            ("minimum", 1): lambda g, ans, a, b: g * (a <= b),
        },
        seen="tenstorrent/tt-metal#48201",
    ),
    Fault(
        "cos.sign",
        "cos's VJP lost its minus sign: it uses sin(x) where the derivative is -sin(x)",
        "d cos(x)/dx is -sin(x): `-g * np.sin(x)`",
        vjps={("cos", 0): lambda g, ans, x: g * np.sin(x)},
        seen="casadi/casadi#2585",
    ),
    Fault(
        "tanh.from-input",
        "tanh's VJP computes 1 - x**2 from the input instead of 1 - y**2 from the output",
        "use the output: `g * (1 - np.tanh(x)**2)`",
        vjps={("tanh", 0): lambda g, ans, x: g * (1 - x * x)},
    ),
    Fault(
        "sigmoid.from-input",
        "sigmoid's VJP computes x * (1 - x) from the input instead of s * (1 - s) from the output",
        "use the output s = sigmoid(x): `g * s * (1 - s)`",
        vjps={("sigmoid", 0): lambda g, ans, x: g * x * (1 - x)},
    ),
    Fault(
        "relu.kink",
        "relu's VJP passes the gradient at x == 0, where TensorFlow takes relu'(0) = 0",
        "use `g * (x > 0)`, not `g * (x >= 0)`",
        vjps={("relu", 0): lambda g, ans, x: g * (x >= 0)},
        seen="iamtrask/Grokking-Deep-Learning#13",
    ),
    Fault(
        "relu.gradient-mask",
        "relu's VJP zeroes the negative entries of the gradient (g > 0) instead of the "
        "entries where the input is negative (x > 0), as guided backprop does",
        "mask by the input: `g * (x > 0)`",
        vjps={("relu", 0): lambda g, ans, x: g * (g > 0)},
        seen="utkuozbulak/pytorch-cnn-visualizations#59",
    ),
    Fault(
        "log.inverted",
        "log's VJP multiplies by x instead of dividing by it",
        "d log(x)/dx is 1/x: `g / x`",
        vjps={("log", 0): lambda g, ans, x: g * x},
    ),
    Fault(
        "sqrt.no-half",
        "sqrt's VJP is missing the factor 1/2",
        "d sqrt(x)/dx is 0.5 / sqrt(x): `g * 0.5 / np.sqrt(x)`",
        vjps={("sqrt", 0): lambda g, ans, x: g / ans},
    ),
    Fault(
        "mean.no-divide",
        "mean's VJP is sum's: it does not divide by the number of averaged elements",
        "divide the spread gradient by n, the number of elements each mean averages: "
        "`np.broadcast_to(g.reshape(kept_shape), x.shape) / n`",
        vjps={("mean", 0): lambda g, ans, x, axis, keepdims: spread(g, x, axis, keepdims)},
    ),
    Fault(
        "mean.total-size",
        "mean's VJP divides by the input's total size instead of the size of the reduced axes",
        "divide by the product of the reduced axes' sizes, not `x.size`",
        vjps={("mean", 0): lambda g, ans, x, axis, keepdims: spread(g, x, axis, keepdims) / x.size},
    ),
    Fault(
        "mean.first-axis",
        "mean's VJP divides by len(x), the size of the first axis, whichever axes the mean "
        "reduces",
        "divide by the number of elements each mean averages, "
        "`np.prod([x.shape[i] for i in axis])`, not `len(x)`",
        vjps={
            ("mean", 0): lambda g, ans, x, axis, keepdims: spread(g, x, axis, keepdims) / len(x)
        },
        seen="kakaobrain/trident#66",
    ),
    Fault(
        "sum.no-expand",
        "sum's VJP broadcasts the gradient without first re-inserting the reduced axes",
        "re-insert the reduced axes before broadcasting: "
        "`np.broadcast_to(np.expand_dims(g, axis), x.shape)` (or reduce with keepdims=True)",
        vjps={("sum", 0): lambda g, ans, x, axis, keepdims: np.broadcast_to(g, x.shape)},
    ),
    Fault(
        "max.all-ties",
        "max/min's VJP gives the whole gradient to every element that ties for the extremum; "
        "TensorFlow splits it equally among them",
        "divide the gradient by the number of tied elements: `m / m.sum(axis, keepdims=True)`",
        vjps={("max", 0): all_ties, ("min", 0): all_ties},
        seen="apache/mxnet#18563",
    ),
    Fault(
        "max.mask-only",
        "max/min's VJP returns the (tie-split) winner mask alone: the upstream gradient g "
        "is never multiplied in",
        "multiply by g with the reduced axes restored: `g.reshape(kept_shape) * m / "
        "m.sum(axis, keepdims=True)`",
        vjps={("max", 0): ties_without_g, ("min", 0): ties_without_g},
        seen="apache/singa#510",
    ),
    Fault(
        "softmax.diagonal",
        "softmax's VJP uses only the Jacobian's diagonal s * (1 - s), ignoring the "
        "cross terms -s_i * s_j",
        "use `s * (g - np.sum(g * s, axis, keepdims=True))`",
        vjps={("softmax", 0): lambda g, ans, x, axis: g * ans * (1 - ans)},
        seen="HomericIntelligence/Odyssey#2134",
    ),
    Fault(
        "softmax.pass-through",
        "softmax's VJP copies the upstream gradient through unchanged, as if softmax were "
        "the identity (the shortcut that is right only fused with cross-entropy)",
        "apply softmax's Jacobian: `s * (g - np.sum(g * s, axis, keepdims=True))`",
        vjps={("softmax", 0): lambda g, ans, x, axis: g},
        seen="pjreddie/darknet#96",
    ),
    Fault(
        "log_softmax.no-softmax",
        "log_softmax's VJP subtracts sum(g) without weighting it by softmax(x)",
        "use `g - np.exp(y) * np.sum(g, axis, keepdims=True)` (np.exp(y) is softmax(x))",
        vjps={("log_softmax", 0): lambda g, ans, x, axis: g - np.sum(g, axis=axis, keepdims=True)},
    ),
    Fault(
        "log_softmax.dot-output",
        "log_softmax's VJP subtracts sum(g * y), the log-probabilities weighted by g (softmax's "
        "form), where it must subtract softmax(x) * sum(g)",
        "use `g - np.exp(y) * np.sum(g, axis, keepdims=True)`",
        vjps={("log_softmax", 0): lambda g, ans, x, axis: g - np.sum(g * ans, axis, keepdims=True)},
        seen="uxlfoundation/oneDNN#616",
    ),
    Fault(
        "transpose.perm-not-inverted",
        "transpose's VJP applies perm again instead of its inverse",
        "transpose the gradient by the inverse permutation: `np.transpose(g, np.argsort(perm))`",
        vjps={
            ("transpose", 0): lambda g, ans, x, perm: np.transpose(
                g, None if perm is None else perm
            )
        },
    ),
    Fault(
        "reshape.no-reshape",
        "reshape's VJP returns the gradient in the output's shape: it is never reshaped back "
        "to the input's",
        "reshape the gradient back: `g.reshape(x.shape)`",
        vjps={("reshape", 0): lambda g, ans, x, shape: g},
        seen="wvabrinskas/Neuron#177",
    ),
    Fault(
        "getitem.slice-shape",
        "getitem's VJP returns the gradient at the slice's shape instead of scattering it "
        "into zeros of the input's shape",
        "scatter it: `z = np.zeros_like(x); z[index] = g`",
        vjps={("getitem", 0): lambda g, ans, x, index: g},
        seen="joelgrus/autograd#2",
    ),
    Fault(
        "concat.first-axis",
        "concat's VJP splits the gradient along axis 0 whatever axis the values were joined on",
        "split along the concat axis: `np.split(g, offsets, axis)[i]`",
        vjps={("concat", 0): concat_first_axis},
        seen="improbable-research/keanu#279",
    ),
    Fault(
        "backprop.no-accumulate",
        "the backward pass overwrites a gradient where a value fans out to several "
        "consumers, instead of adding the contributions",
        "accumulate: `grad[x] = grad[x] + contribution` for every consumer of x (`+=`, not `=`)",
        driver="no-accumulate",
        seen="karpathy/nn-zero-to-hero#52",
    ),
    Fault(
        "backprop.traversal-order",
        "the backward pass visits nodes in queue (breadth-first) order, so a node can pass "
        "its gradient on before all of its consumers have contributed to it",
        "visit nodes in reverse topological order (each after all its consumers): "
        "`for node in reversed(topological_order(output))`",
        driver="traversal-order",
        seen="the question gradcheck grew from (cases/seed.yaml, examples/seed_engine.py)",
    ),
    Fault(
        "backprop.no-upstream",
        "the VJPs receive ones instead of the upstream gradient: the chain rule is not applied",
        "pass each node's own gradient to its VJP: `vjp(node, grads[node])`, not `ones_like`",
        driver="no-upstream",
    ),
    # -- forward mode ---------------------------------------------------------------------
    Fault(
        "jvp.vjp-rule",
        "the JVP is the VJP's rule applied to the tangent (g replaced by t): the Jacobian's "
        "transpose where forward mode needs the Jacobian itself, right only where it is "
        "symmetric (elementwise ops, softmax)",
        "apply the Jacobian, not its transpose: matmul's JVPs are `t @ b` and `a @ t` (not "
        "`t @ b.T`), transpose's is `np.transpose(t, perm)` (not the inverse permutation), "
        "a reduction's reduces `t`",
        check="jvp",
        seen="pytorch/pytorch#198017",
        jvps={
            (op.name, i): vjp_as_jvp(vjp)
            for op in all_ops()
            if op.origin is None
            for i, vjp in enumerate(op.vjps)
        },
    ),
    Fault(
        "jvp.no-broadcast",
        "the JVP of a broadcasting op leaves an argument's tangent in the argument's shape "
        "instead of broadcasting it to the output's",
        "broadcast each argument's tangent to the output's shape: "
        "`np.broadcast_to(t, y.shape)` (for a + b, the tangent of a is t broadcast)",
        check="jvp",
        unbroadcast_tangent=BROADCASTING,
        seen="pytorch/pytorch#191787",
    ),
)
# fmt: on

FAULTS: dict[str, Fault] = {f.name: f for f in CATALOGUE}


def _check_catalogue() -> None:
    for fault in CATALOGUE:
        for op_name, i in fault.vjps:
            op = get_op(op_name)  # a typo in an op name fails at import, not at diagnosis time
            if i >= max(1, len(op.params)):
                raise ValueError(f"fault {fault.name}: {op_name} has no argument {i}")


_check_catalogue()
