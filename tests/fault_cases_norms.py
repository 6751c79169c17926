"""The cases of the norms', losses', clip's and linear algebra's catalogue faults
(catalogue/norms.py, catalogue/linalg.py), merged into test_faults.FAULT_CASES.

Each separates its fault from every other one in the catalogue:

* the cross-entropy labels sum to 1 along the classes (the op requires it) and are not
  one-hot, so that the labels' own gradient is not zero where the engine's is;
* clip's x lies on both sides of [lo, hi], since inside it pass-through is right;
* inv's and solve's matrices are literals, well-conditioned and *not* symmetric: for a
  symmetric matrix the untransposed rules are right by accident;
* cholesky's input is a symmetric positive-definite literal given as it is: through
  x @ x^T the triangular gradient sums to the symmetric one.
"""

from __future__ import annotations

LABELS = [[0.1, 0.2, 0.3, 0.4], [0.25, 0.25, 0.25, 0.25], [0.7, 0.1, 0.1, 0.1]]
CE = {
    "expr": "softmax_cross_entropy(logits, labels)",
    "inputs": {"logits": {"shape": [3, 4]}, "labels": LABELS},
}
MATRIX = [[2.0, 0.5, 0.1], [0.3, 1.5, -0.4], [0.2, -0.1, 1.8]]
SPD = [[4.0, 1.0, 0.5], [1.0, 3.0, -0.5], [0.5, -0.5, 2.0]]

NORM_CASES: dict[str, dict] = {
    "batch_norm.constant-statistics": {"expr": "batch_norm(x)", "inputs": {"x": {"shape": [5, 3]}}},
    "batch_norm.no-variance-term": {"expr": "batch_norm(x)", "inputs": {"x": {"shape": [5, 3]}}},
    "layer_norm.mean-twice": {"expr": "layer_norm(x)", "inputs": {"x": {"shape": [3, 5]}}},
    "softmax_cross_entropy.sign": CE,
    "softmax_cross_entropy.batch-divided": CE,
    "softmax_cross_entropy.softmax-axis": CE,
    "softmax_cross_entropy.labels-constant": CE,
    "sparse_softmax_cross_entropy.batch-divided": {
        "expr": "sparse_softmax_cross_entropy(logits, labels)",
        "inputs": {"logits": {"shape": [3, 4]}, "labels": {"values": [0, 3, 1], "dtype": "int64"}},
    },
    "clip.pass-through": {
        "expr": "clip(x, -1.0, 1.5) * w",
        "inputs": {"x": [-2.0, -0.5, 0.25, 1.25, 3.0], "w": {"shape": [5]}},
    },
    "clip.bounds-swapped": {
        "expr": "clip(x, -1.0, 1.5) * w",
        "inputs": {"x": [-2.0, -0.5, 0.25, 1.25, 3.0], "w": {"shape": [5]}},
    },
    "inv.untransposed": {"expr": "inv(x)", "inputs": {"x": MATRIX}},
    "inv.elementwise": {"expr": "inv(x)", "inputs": {"x": MATRIX}},
    "solve.untransposed": {"expr": "solve(a, b)", "inputs": {"a": MATRIX, "b": {"shape": [3, 2]}}},
    "solve.a-dropped": {"expr": "solve(a, b)", "inputs": {"a": MATRIX, "b": {"shape": [3, 2]}}},
    # a batch as long as the matrices are wide, so that a.T (every axis reversed) has the
    # shape a matrix transpose has and the fault gives numbers rather than raising
    "triangular_solve.full-transpose": {
        "expr": "triangular_solve(e + x, b)",
        "inputs": {
            "e": [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
            "x": {"shape": [3, 3, 3], "init": "uniform", "low": -0.3, "high": 0.3},
            "b": {"shape": [3, 3, 3]},
        },
    },
    "cholesky.triangular": {"expr": "cholesky(s)", "inputs": {"s": SPD}},
    "einsum.repeated-index-ones": {
        "expr": 'einsum("ii->i", x)',
        "inputs": {"x": {"shape": [3, 3]}},
    },
}
