"""Faults of the reductions and softmaxes: divisions, expansions, ties, the Jacobian's terms."""

from __future__ import annotations

import numpy as np

from ....ops.reductions import spread
from ..rules import Fault, all_ties, ties_without_g

# fmt: off
FAULTS: tuple[Fault, ...] = (
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
)
# fmt: on
