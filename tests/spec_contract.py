"""Lists the product contract (../shared/SPEC.md) fixes, shared by the tests that hold to them."""

# SPEC §6, "Fingerprints ... At least:" -- the contract, copied from the SPEC.
SPEC_FAULTS = (
    "matmul.full-transpose",
    "matmul.no-batch-reduce",
    "broadcast.no-reduce",
    "broadcast.leading-only",
    "mul.self",
    "sub.sign",
    "div.sign",
    "div.square",
    "pow.exponent",
    "tanh.from-input",
    "sigmoid.from-input",
    "relu.kink",
    "log.inverted",
    "sqrt.no-half",
    "mean.no-divide",
    "mean.total-size",
    "sum.no-expand",
    "max.all-ties",
    "softmax.diagonal",
    "log_softmax.no-softmax",
    "transpose.perm-not-inverted",
    "backprop.no-accumulate",
    "backprop.traversal-order",
    "backprop.no-upstream",
)
