"""The corpus: correct engines, deliberately broken ones, and the cases that tell them apart.

It is the test bed for gradcheck's diagnosis (SPEC §6). Three correct engines, each a
different way of writing reverse mode, must pass every shipped case they support with
no hint at all:

* `tape_engine.py`: a Wengert list over NumPy, walked backwards;
* `closure_engine.py`: micrograd-style values with `_backward` closures;
* `tfop_engine.py`: tensors and VJPs written with TensorFlow ops, like the seed question.

Every `Bug` is a small subclass of one of them with exactly one planted bug (its
docstring says which), the corpus case that shows it, and the hint gradcheck must put
first for that case: `fault:<name>` for the faults of gradcheck's catalogue, and for
the others the localisation (`op-vjp` with the op and argument), `stale-gradients` or
`forward-mismatch`. Paths are relative to the repository root, so every entry is also
a command line::

    gradcheck run tests/corpus/cases/elementwise.yaml -k mul_plus_other \\
        --engine tests/corpus/tape_bugs.py:MulSelf
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CASES = "tests/corpus/cases"


@dataclass(frozen=True)
class Bug:
    """One planted bug: where it lives, which case shows it, what gradcheck should say."""

    engine: str  # "tests/corpus/tape_bugs.py:MulSelf", as for --engine
    cases: str  # a case file, relative to the repository root
    k: str | None  # `-k` filter selecting the one case of `cases` that shows the bug
    hint: str  # the code of the top hint: "fault:mul.self", "op-vjp", ...
    op: str | None = None  # for op-vjp: the op gradcheck must name ...
    arg: int | None = None  # ... and the argument

    @property
    def base(self) -> str:
        """The correct engine this bug's class derives from."""
        module = self.engine.split(":")[0]
        return module.replace("_bugs.py", "_engine.py") + ":Engine"

    @property
    def style(self) -> str:
        return Path(self.engine.split(":")[0]).stem.removesuffix("_bugs")

    @property
    def id(self) -> str:
        return f"{self.style}:{self.engine.split(':')[1]}"


CORRECT_ENGINES: list[str] = [
    "tests/corpus/tape_engine.py:Engine",
    "tests/corpus/closure_engine.py:Engine",
    "tests/corpus/tfop_engine.py:Engine",
]

_TAPE = "tests/corpus/tape_bugs.py"
_CLOSURE = "tests/corpus/closure_bugs.py"
_TFOP = "tests/corpus/tfop_bugs.py"

# fmt: off
BUGS: list[Bug] = [
    # -- the fault catalogue (SPEC §6), every entry -----------------------------------
    Bug(f"{_TFOP}:MatmulFullTranspose", f"{CASES}/matmul.yaml", "batched_cubes",
        "fault:matmul.full-transpose"),
    Bug(f"{_TFOP}:MatmulFullTranspose", "cases/seed.yaml", None,
        "fault:matmul.full-transpose"),
    Bug(f"{_TFOP}:MatmulNoBatchReduce", f"{CASES}/matmul.yaml", "batch_times_matrix",
        "fault:matmul.no-batch-reduce"),
    Bug(f"{_TAPE}:BroadcastNoReduce", f"{CASES}/broadcast.yaml", "size1_and_leading",
        "fault:broadcast.no-reduce"),
    Bug(f"{_CLOSURE}:BroadcastLeadingOnly", f"{CASES}/broadcast.yaml", "size1_and_leading",
        "fault:broadcast.leading-only"),
    Bug(f"{_TAPE}:MulSelf", f"{CASES}/elementwise.yaml", "mul_plus_other",
        "fault:mul.self"),
    Bug(f"{_CLOSURE}:SubSign", f"{CASES}/elementwise.yaml", "sub_of_product",
        "fault:sub.sign"),
    Bug(f"{_TAPE}:DivSign", f"{CASES}/elementwise.yaml", "quotient_plus_denominator",
        "fault:div.sign"),
    Bug(f"{_CLOSURE}:DivSquare", f"{CASES}/elementwise.yaml", "quotient_plus_denominator",
        "fault:div.square"),
    Bug(f"{_TAPE}:PowExponent", f"{CASES}/elementwise.yaml", "power_positive_base",
        "fault:pow.exponent"),
    Bug(f"{_CLOSURE}:TanhFromInput", f"{CASES}/elementwise.yaml", "tanh_alone",
        "fault:tanh.from-input"),
    Bug(f"{_TFOP}:SigmoidFromInput", f"{CASES}/elementwise.yaml", "sigmoid_alone",
        "fault:sigmoid.from-input"),
    Bug(f"{_TFOP}:ReluKink", f"{CASES}/kinks.yaml", "relu_exact_zeros",
        "fault:relu.kink"),
    Bug(f"{_CLOSURE}:LogInverted", f"{CASES}/elementwise.yaml", "log_positive",
        "fault:log.inverted"),
    Bug(f"{_TFOP}:SqrtNoHalf", f"{CASES}/elementwise.yaml", "sqrt_plus_identity",
        "fault:sqrt.no-half"),
    Bug(f"{_CLOSURE}:MeanNoDivide", f"{CASES}/reductions.yaml", "center_last_axis",
        "fault:mean.no-divide"),
    Bug(f"{_TAPE}:MeanTotalSize", f"{CASES}/reductions.yaml", "center_outer_axes",
        "fault:mean.total-size"),
    Bug(f"{_CLOSURE}:SumNoExpand", f"{CASES}/reductions.yaml", "row_sums_of_product",
        "fault:sum.no-expand"),
    Bug(f"{_TAPE}:MaxAllTies", f"{CASES}/kinks.yaml", "max_row_ties",
        "fault:max.all-ties"),
    Bug(f"{_CLOSURE}:SoftmaxDiagonal", f"{CASES}/nn.yaml", "rowwise_softmax",
        "fault:softmax.diagonal"),
    Bug(f"{_TFOP}:LogSoftmaxNoSoftmax", f"{CASES}/nn.yaml", "rowwise_log_softmax",
        "fault:log_softmax.no-softmax"),
    Bug(f"{_TAPE}:TransposePermNotInverted", f"{CASES}/shapes.yaml", "cyclic_perm_cube",
        "fault:transpose.perm-not-inverted"),
    Bug(f"{_CLOSURE}:NoAccumulate", f"{CASES}/backprop.yaml", "fan_out_through_exp",
        "fault:backprop.no-accumulate"),
    Bug(f"{_TFOP}:TraversalOrder", f"{CASES}/backprop.yaml", "reused_after_exp",
        "fault:backprop.traversal-order"),
    Bug(f"{_TAPE}:NoUpstream", f"{CASES}/backprop.yaml", "chain_sin_times",
        "fault:backprop.no-upstream"),
    # -- bugs the catalogue does not know: localisation and the other checks ---------
    Bug(f"{_TFOP}:MatmulWrongOrder", f"{CASES}/matmul.yaml", "square_2d",
        "op-vjp", op="matmul", arg=0),
    Bug(f"{_TFOP}:ExpIgnoresUpstream", f"{CASES}/elementwise.yaml", "exp_times_other",
        "op-vjp", op="exp", arg=0),
    Bug(f"{_CLOSURE}:StaleGradients", f"{CASES}/backprop.yaml", "chain_sin_times",
        "stale-gradients"),
    Bug(f"{_TAPE}:SigmoidForwardIsTanh", f"{CASES}/elementwise.yaml", "sigmoid_alone",
        "forward-mismatch"),
]
# fmt: on
