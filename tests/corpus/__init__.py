"""The corpus: correct engines, deliberately broken ones, and the cases that tell them apart.

It is the test bed for gradcheck's diagnosis (SPEC §6). Three correct engines, each a
different way of writing reverse mode, must pass every shipped case they support with
no hint at all:

* `tape_engine.py`: a Wengert list over NumPy, walked backwards;
* `closure_engine.py`: micrograd-style values with `_backward` closures;
* `tfop_engine.py`: tensors and VJPs written with TensorFlow ops, like the seed question.

A fourth, `linalg_engine.py`, is the tape engine with the norms, losses, clip, solvers and
einsum, where the catalogue faults of those ops are planted (`linalg_bugs.py`).
`window_engine.py` adds the windowed and indexed ops to the tape engine (their rules
gradcheck's own), for `window_bugs.py`'s bugs of those ops, each shown by a shipped case;
it is checked clean on the shipped cases of its ops apart (`WINDOW_ENGINE`).

Every `Bug` is a small subclass of one of them with exactly one planted bug (its
docstring says which), the corpus case that shows it, and the hint gradcheck must put
first for that case: `fault:<name>` for the faults of gradcheck's catalogue, and for
the others the localisation (`op-vjp` with the op, the argument and the mechanism the
probes find, SPEC §6.1; `kink` with the convention an engine follows at a tie),
`stale-gradients` or `forward-mismatch`. A bug that makes the engine raise is an
`error` case whose top hint localises the error. Paths are relative to the repository
root, so every entry is also a command line::

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
    op: str | None = None  # for op-vjp / kink: the op gradcheck must name ...
    arg: int | None = None  # ... the argument ...
    mechanism: str | None = None  # ... and what is wrong with its rule (SPEC §6.1)
    node: str | None = None  # for backprop-driver / stale-gradients: the node it names
    status: str = "failed"  # "error" for a bug that makes the engine raise

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
# The tape engine with the norms, losses, clip, solvers and einsum: correct too, checked on
# the case files of those ops (test_norm_linalg_faults.py) rather than fuzzed over all its
# ops, since the fuzzer's 500 examples never draw cholesky or triangular_solve among 45.
LINALG_ENGINE = "tests/corpus/linalg_engine.py:Engine"

# The base of window_bugs.py, checked clean on the shipped cases of its ops apart
# (test_new_op_faults.py): fuzzed over all its ops, 500 examples reach only some of them.
WINDOW_ENGINE = "tests/corpus/window_engine.py:Engine"

_TAPE = "tests/corpus/tape_bugs.py"
_CLOSURE = "tests/corpus/closure_bugs.py"
_TFOP = "tests/corpus/tfop_bugs.py"
_LINALG = "tests/corpus/linalg_bugs.py"
_NORMS_LINALG = f"{CASES}/norms_linalg.yaml"
_WINDOW = "tests/corpus/window_bugs.py"


def _driver(engine: str, k: str, mechanism: str, node: str) -> Bug:
    """A driver bug on a case of backprop.yaml; `not-zeroed` is said by stale-gradients."""
    hint = "stale-gradients" if mechanism == "not-zeroed" else "backprop-driver"
    return Bug(engine, f"{CASES}/backprop.yaml", k, hint, mechanism=mechanism, node=node)


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
    Bug(f"{_CLOSURE}:SendWithoutUnbroadcast", f"{CASES}/mechanisms.yaml",
        "broadcast_then_multiply", "fault:broadcast.no-reduce"),
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
    Bug(f"{_CLOSURE}:NoAccumulateLeavesOnly", f"{CASES}/backprop.yaml", "fan_out_through_exp",
        "fault:backprop.no-accumulate"),
    Bug(f"{_TFOP}:TraversalOrderLeavesOnly", f"{CASES}/backprop.yaml", "reused_after_exp",
        "fault:backprop.traversal-order"),
    Bug(f"{_TAPE}:NoUpstream", f"{CASES}/backprop.yaml", "chain_sin_times",
        "fault:backprop.no-upstream"),
    # -- catalogue faults added with the mechanism probes, public bug classes -------
    Bug(f"{_TAPE}:BroadcastLeadingKept", f"{CASES}/broadcast.yaml", "size1_and_leading",
        "fault:broadcast.leading-kept"),
    Bug(f"{_TAPE}:PowDividesByBase", f"{CASES}/elementwise.yaml", "power_through_zero",
        "fault:pow.divides-by-base"),
    Bug(f"{_TAPE}:MaximumMaskOnly", f"{CASES}/elementwise.yaml", "maximum_times_other",
        "fault:maximum.mask-only"),
    Bug(f"{_TAPE}:MeanFirstAxis", f"{CASES}/reductions.yaml", "center_last_axis",
        "fault:mean.first-axis"),
    Bug(f"{_TAPE}:GetitemSliceShape", f"{CASES}/shapes.yaml", "row_slice",
        "fault:getitem.slice-shape"),
    Bug(f"{_TAPE}:ConcatFirstAxis", f"{CASES}/shapes.yaml", "concat_columns",
        "fault:concat.first-axis"),
    Bug(f"{_CLOSURE}:DivNumeratorSelf", f"{CASES}/elementwise.yaml",
        "quotient_plus_denominator", "fault:div.numerator-self"),
    Bug(f"{_CLOSURE}:PowPowerRuleExponent", f"{CASES}/elementwise.yaml", "power_positive_base",
        "fault:pow.power-rule-exponent"),
    Bug(f"{_CLOSURE}:MaximumInverted", f"{CASES}/elementwise.yaml", "maximum_times_other",
        "fault:maximum.inverted"),
    Bug(f"{_CLOSURE}:CosSign", f"{CASES}/elementwise.yaml", "cos_times_other",
        "fault:cos.sign"),
    Bug(f"{_CLOSURE}:ReluGradientMask", f"{CASES}/elementwise.yaml", "relu_times_other",
        "fault:relu.gradient-mask"),
    Bug(f"{_CLOSURE}:SoftmaxPassThrough", f"{CASES}/nn.yaml", "rowwise_softmax",
        "fault:softmax.pass-through"),
    Bug(f"{_TFOP}:MaxMaskOnly", f"{CASES}/reductions.yaml", "row_max_times_other",
        "fault:max.mask-only"),
    Bug(f"{_TFOP}:LogSoftmaxDotOutput", f"{CASES}/nn.yaml", "rowwise_log_softmax",
        "fault:log_softmax.dot-output"),
    Bug(f"{_TFOP}:ReshapeNotReshaped", f"{CASES}/shapes.yaml", "reshape_times_other",
        "fault:reshape.no-reshape"),
    Bug(f"{_TFOP}:MatmulUntransposed", f"{CASES}/matmul.yaml", "square_2d",
        "fault:matmul.untransposed"),
    # -- the catalogue faults of the norms, losses, clip and linear algebra (issue 25) -
    *(Bug(f"{_LINALG}:{cls}", _NORMS_LINALG, k, f"fault:{fault}") for cls, k, fault in (
        ("BatchNormConstantStatistics", "batch_norm_times", "batch_norm.constant-statistics"),
        ("BatchNormNoVarianceTerm", "batch_norm_times", "batch_norm.no-variance-term"),
        ("LayerNormMeanTwice", "layer_norm_alone", "layer_norm.mean-twice"),
        ("CrossEntropySign", "soft_label", "softmax_cross_entropy.sign"),
        ("CrossEntropyBatchDivided", "soft_label", "softmax_cross_entropy.batch-divided"),
        ("CrossEntropySoftmaxAxis", "soft_label", "softmax_cross_entropy.softmax-axis"),
        ("CrossEntropyLabelsConstant", "soft_label", "softmax_cross_entropy.labels-constant"),
        ("SparseCrossEntropyBatchDivided", "sparse_cross_entropy",
         "sparse_softmax_cross_entropy.batch-divided"),
        ("ClipPassThrough", "clip_both_sides", "clip.pass-through"),
        ("ClipBoundsSwapped", "clip_both_sides", "clip.bounds-swapped"),
        ("InvUntransposed", "inv_alone", "inv.untransposed"),
        ("InvElementwise", "inv_alone", "inv.elementwise"),
        ("SolveUntransposed", "solve_alone", "solve.untransposed"),
        ("SolveDropsMatrix", "solve_alone", "solve.a-dropped"),
        ("TriangularSolveFullTranspose", "triangular_solve_batch",
         "triangular_solve.full-transpose"),
        ("CholeskyTriangular", "cholesky_alone", "cholesky.triangular"),
        ("EinsumOnesForIdentity", "einsum_diagonal", "einsum.repeated-index-ones"),
    )),
    # -- mechanisms (SPEC §6.1) of bugs the catalogue does not know, in three styles -
    Bug(f"{_TAPE}:TanhIgnoresUpstream", f"{CASES}/mechanisms.yaml", "tanh_times_other",
        "op-vjp", op="tanh", arg=0, mechanism="ignores-upstream"),
    Bug(f"{_CLOSURE}:SigmoidIgnoresUpstream", f"{CASES}/mechanisms.yaml",
        "sigmoid_times_other", "op-vjp", op="sigmoid", arg=0, mechanism="ignores-upstream"),
    Bug(f"{_TFOP}:ExpIgnoresUpstream", f"{CASES}/elementwise.yaml", "exp_times_other",
        "op-vjp", op="exp", arg=0, mechanism="ignores-upstream"),
    Bug(f"{_TAPE}:TanhClipsGradient", f"{CASES}/mechanisms.yaml", "tanh_times_other",
        "op-vjp", op="tanh", arg=0, mechanism="not-linear"),
    Bug(f"{_CLOSURE}:SinAbsGradient", f"{CASES}/mechanisms.yaml", "sin_times_other",
        "op-vjp", op="sin", arg=0, mechanism="not-linear"),
    Bug(f"{_TFOP}:ExpClipsGradient", f"{CASES}/elementwise.yaml", "exp_times_other",
        "op-vjp", op="exp", arg=0, mechanism="not-linear"),
    Bug(f"{_TAPE}:ExpPassesGradient", f"{CASES}/elementwise.yaml", "exp_times_other",
        "op-vjp", op="exp", arg=0, mechanism="identity"),
    Bug(f"{_CLOSURE}:LogPassesGradient", f"{CASES}/mechanisms.yaml", "log_times_other",
        "op-vjp", op="log", arg=0, mechanism="identity"),
    Bug(f"{_TFOP}:SqrtPassesGradient", f"{CASES}/mechanisms.yaml", "sqrt_times_other",
        "op-vjp", op="sqrt", arg=0, mechanism="identity"),
    Bug(f"{_TAPE}:SinDetached", f"{CASES}/mechanisms.yaml", "sin_times_other",
        "op-vjp", op="sin", arg=0, mechanism="zero"),
    Bug(f"{_CLOSURE}:SigmoidNoBackward", f"{CASES}/mechanisms.yaml", "sigmoid_times_other",
        "op-vjp", op="sigmoid", arg=0, mechanism="zero"),
    Bug(f"{_TFOP}:TanhStopped", f"{CASES}/mechanisms.yaml", "tanh_times_other",
        "op-vjp", op="tanh", arg=0, mechanism="zero"),
    Bug(f"{_TAPE}:SquareNoTwo", f"{CASES}/mechanisms.yaml", "square_times_other",
        "op-vjp", op="square", arg=0, mechanism="scaled"),
    Bug(f"{_CLOSURE}:SquareNoTwo", f"{CASES}/mechanisms.yaml", "square_times_other",
        "op-vjp", op="square", arg=0, mechanism="scaled"),
    Bug(f"{_TFOP}:SquareNoTwo", f"{CASES}/mechanisms.yaml", "square_times_other",
        "op-vjp", op="square", arg=0, mechanism="scaled"),
    Bug(f"{_TAPE}:SinSign", f"{CASES}/mechanisms.yaml", "sin_times_other",
        "op-vjp", op="sin", arg=0, mechanism="sign-flip"),
    Bug(f"{_CLOSURE}:SinSign", f"{CASES}/mechanisms.yaml", "sin_times_other",
        "op-vjp", op="sin", arg=0, mechanism="sign-flip"),
    Bug(f"{_TFOP}:LogSign", f"{CASES}/mechanisms.yaml", "log_times_other",
        "op-vjp", op="log", arg=0, mechanism="sign-flip"),
    Bug(f"{_TAPE}:MatmulTransposedB", f"{CASES}/matmul.yaml", "square_2d",
        "op-vjp", op="matmul", arg=1, mechanism="transposed"),
    Bug(f"{_CLOSURE}:MatmulTransposedB", f"{CASES}/matmul.yaml", "square_2d",
        "op-vjp", op="matmul", arg=1, mechanism="transposed"),
    Bug(f"{_TFOP}:MatmulTransposedB", f"{CASES}/matmul.yaml", "square_2d",
        "op-vjp", op="matmul", arg=1, mechanism="transposed"),
    Bug(f"{_TAPE}:UnbroadcastNoKeepdims", f"{CASES}/mechanisms.yaml", "column_times_matrix",
        "op-vjp", op="mul", arg=1, mechanism="shape"),
    Bug(f"{_CLOSURE}:ExpandDimsSkipsSend", f"{CASES}/mechanisms.yaml", "expand_then_broadcast",
        "op-vjp", op="expand_dims", arg=0, mechanism="shape"),
    Bug(f"{_TFOP}:ReshapeNotReshaped", f"{CASES}/mechanisms.yaml", "expand_then_broadcast",
        "op-vjp", op="expand_dims", arg=0, mechanism="shape"),
    Bug(f"{_TAPE}:SigmoidNaive", f"{CASES}/mechanisms.yaml", "sigmoid_far_out",
        "op-vjp", op="sigmoid", arg=0, mechanism="nan-region"),
    Bug(f"{_CLOSURE}:SigmoidNaive", f"{CASES}/mechanisms.yaml", "sigmoid_far_out",
        "op-vjp", op="sigmoid", arg=0, mechanism="nan-region"),
    Bug(f"{_TFOP}:LogSoftmaxNaive", f"{CASES}/mechanisms.yaml", "log_softmax_far_out",
        "op-vjp", op="log_softmax", arg=0, mechanism="nan-region"),
    Bug(f"{_TAPE}:MaxMaskOnlyNotMin", f"{CASES}/mechanisms.yaml", "max_minus_min",
        "op-vjp", op="max", arg=0, mechanism="fault:max.mask-only"),
    Bug(f"{_CLOSURE}:MaximumMaskOnlyNotMinimum", f"{CASES}/mechanisms.yaml",
        "maximum_minus_minimum", "op-vjp", op="maximum", arg=0,
        mechanism="fault:maximum.mask-only"),
    Bug(f"{_TFOP}:MaximumInvertedNotMinimum", f"{CASES}/mechanisms.yaml",
        "maximum_minus_minimum", "op-vjp", op="maximum", arg=0,
        mechanism="fault:maximum.inverted"),
    Bug(f"{_CLOSURE}:BroadcastToSkipsSend", f"{CASES}/mechanisms.yaml", "broadcast_then_add",
        "op-vjp", op="broadcast_to", arg=0, mechanism="fault:broadcast.no-reduce"),
    Bug(f"{_TAPE}:DivByCube", f"{CASES}/elementwise.yaml", "quotient_plus_denominator",
        "op-vjp", op="div", arg=1, mechanism="formula"),
    Bug(f"{_CLOSURE}:LogSquared", f"{CASES}/mechanisms.yaml", "log_times_other",
        "op-vjp", op="log", arg=0, mechanism="formula"),
    Bug(f"{_TFOP}:MatmulWrongOrder", f"{CASES}/matmul.yaml", "square_2d",
        "op-vjp", op="matmul", arg=0, mechanism="formula"),
    # -- another convention at a kink, undeclared: named for what it is -------------
    Bug(f"{_TAPE}:ReluHalf", f"{CASES}/conventions.yaml", "relu_zeros",
        "kink", op="relu", arg=0, mechanism="relu:half"),
    Bug(f"{_CLOSURE}:MaximumSplit", f"{CASES}/conventions.yaml", "maximum_ties",
        "kink", op="maximum", arg=0, mechanism="maximum:split"),
    Bug(f"{_TFOP}:MaxFirst", f"{CASES}/conventions.yaml", "max_ties",
        "kink", op="max", arg=0, mechanism="max:first"),
    # -- the engine raises: the error is localised and the fault that raises named ---
    Bug(f"{_TFOP}:MatmulFullTranspose", f"{CASES}/errors.yaml", "batched_nonsquare",
        "op-vjp", op="matmul", arg=0, mechanism="fault:matmul.full-transpose",
        status="error"),
    Bug(f"{_TAPE}:MatmulUntransposed", f"{CASES}/errors.yaml", "nonsquare_2d",
        "op-vjp", op="matmul", arg=0, mechanism="fault:matmul.untransposed", status="error"),
    # -- the backward driver (SPEC §6.1): the node where it goes wrong, and how -------
    *(_driver(f"{style}:{cls}", k, m, node)
      for style in (_TAPE, _CLOSURE)
      for cls, k, m, node in [
          ("RecursiveBackward", "reused_after_exp", "per-path", "x"),
          ("RecursiveBackward", "shared_non_leaf", "per-path", "x"),
          ("RecursiveBackward", "reused_twice_by_one_op", "per-path", "a"),
          ("RecursiveBackward", "product_used_twice", "per-path", "x"),
          ("VisitedOnFirstPath", "reused_after_exp", "early-propagation", "x"),
          ("VisitedOnFirstPath", "shared_non_leaf", "early-propagation", "x"),
          ("AddsLaterSharesTwice", "fan_out_through_exp", "unknown", "x"),
      ]),
    *(_driver(engine, k, "no-accumulate", "x")
      for engine in (f"{_TAPE}:OverwriteAtFanOut", f"{_CLOSURE}:NoAccumulate")
      for k in ("fan_out_through_exp", "twice_plus_exp")),  # the kept share either way
    _driver(f"{_TAPE}:OverwriteAtFanOut", "reused_after_exp", "no-accumulate", "exp(x)"),
    _driver(f"{_TAPE}:FirstInputOnly", "second_operand_chain", "missed-node", "y"),
    _driver(f"{_CLOSURE}:ForwardOrder", "second_operand_chain", "missed-node", "y"),
    _driver(f"{_CLOSURE}:ForwardOrder", "chain_sin_times", "missed-node", "x"),
    _driver(f"{_TFOP}:TraversalOrder", "reused_after_exp", "per-path", "x"),
    _driver(f"{_TAPE}:KeepsGradients", "chain_sin_times", "not-zeroed", "sin(x)"),
    _driver(f"{_CLOSURE}:ZeroesLeavesOnly", "chain_sin_times", "not-zeroed", "sin(x)"),
    _driver(f"{_CLOSURE}:StaleGradients", "chain_sin_times", "not-zeroed", "y"),
    # -- bugs the catalogue does not know: the other checks ----------------------------
    Bug(f"{_TAPE}:SigmoidForwardIsTanh", f"{CASES}/elementwise.yaml", "sigmoid_alone",
        "forward-mismatch"),
    # -- the windowed and indexed ops' faults, on the shipped cases that show them ------
    *(Bug(f"{_WINDOW}:{cls}", f"cases/{file}.yaml", k, f"fault:{fault}")
      for cls, file, k, fault in [
          ("Conv2dKernelNotFlipped", "conv", "conv2d_valid", "conv2d.kernel-not-flipped"),
          ("Conv1dKernelNotFlipped", "conv", "conv1d_valid", "conv1d.kernel-not-flipped"),
          ("Conv2dStrideNotDilated", "conv", "conv2d_depthwise_nchw",
           "conv2d.stride-not-dilated"),
          ("Conv1dStrideNotDilated", "conv", "conv1d_same_stride2_even_kernel",
           "conv1d.stride-not-dilated"),
          ("Conv2dCropFromStart", "conv", "conv2d_nchw_oihw_int_padding",
           "conv2d.crop-from-start"),
          ("Conv1dCropFromStart", "conv", "conv1d_ncw_oiw_dilated", "conv1d.crop-from-start"),
          ("Conv2dSamePadBefore", "conv", "conv2d_same_stride2_even_kernel",
           "conv2d.same-pad-before"),
          ("Conv1dSamePadBefore", "conv", "conv1d_groups", "conv1d.same-pad-before"),
          ("Conv2dGroupsInterleaved", "conv", "conv2d_groups", "conv2d.groups-interleaved"),
          ("Conv1dGroupsInterleaved", "conv", "conv1d_groups", "conv1d.groups-interleaved"),
          ("Conv2dFilterReshaped", "conv", "conv2d_nchw_oihw_int_padding",
           "conv2d.filter-reshaped"),
          ("Conv1dFilterReshaped", "conv", "conv1d_ncw_oiw_dilated", "conv1d.filter-reshaped"),
          ("Conv2dTransposeSamePadBefore", "conv", "conv2d_transpose_stride2_same",
           "conv2d_transpose.same-pad-before"),
          ("MaxPool2dAllMaxima", "kinks", "max_pool2d_ties_first", "max_pool2d.all-maxima"),
          ("MaxPool1dAllMaxima", "kinks", "max_pool1d_ties_same", "max_pool1d.all-maxima"),
          ("MaxPool2dOverlapAssigned", "pooling", "max_pool2d_overlapping",
           "max_pool2d.overlap-assigned"),
          ("MaxPool1dOverlapAssigned", "pooling", "max_pool1d_overlapping",
           "max_pool1d.overlap-assigned"),
          ("AvgPool2dFullWindow", "pooling", "avg_pool2d_same_counts_inbounds",
           "avg_pool2d.full-window"),
          ("AvgPool1dFullWindow", "pooling", "avg_pool1d_ncw_same", "avg_pool1d.full-window"),
          ("TakeOverwrite", "gathers", "take_repeated_indices", "take.overwrite"),
          ("TakeAlongAxisOverwrite", "gathers", "take_along_axis_rows",
           "take_along_axis.overwrite"),
          ("ProdDividesByX", "products", "prod_one_zero_and_two_zeros", "prod.divides-by-x"),
          ("CumsumNotReversed", "products", "cumsum_backwards", "cumsum.not-reversed"),
          ("CumprodDividesByX", "products", "cumprod_at_zeros", "cumprod.divides-by-x"),
          ("FlipNotFlipped", "shapes", "flip_two_axes", "flip.not-flipped"),
          ("RollNotInverted", "layout", "roll_negative_two_axes", "roll.not-inverted"),
      ]),
]
# fmt: on
