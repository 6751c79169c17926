"""The fuzzer's parts: generated cases are valid, fair and varied; what is written reads
back as the case that was checked; the search is reproducible and keeps to its budget.

The generator's properties are themselves tested with Hypothesis, over its own strategy.
"""

from __future__ import annotations

import io
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from gradcheck.cases.loader import load_case, load_file
from gradcheck.cases.model import Case
from gradcheck.engines.builtin.engine import BuiltinEngine
from gradcheck.engines.driver import build_expression
from gradcheck.errors import UsageError
from gradcheck.fuzzing import Budget, fuzz_engine, supported_ops
from gradcheck.fuzzing.coverage import Coverage
from gradcheck.fuzzing.domain import Unfair, admissible, kink_distance, kink_gap
from gradcheck.fuzzing.generate import Space, examples
from gradcheck.fuzzing.output import case_file_text, case_name
from gradcheck.fuzzing.program import Apply, Leaf, Literal, Program
from gradcheck.fuzzing.proposals import MAX_NODE_ELEMENTS, completions, first_ranks
from gradcheck.fuzzing.search import bug_key, describe
from gradcheck.ops import Interval, all_ops, get_op
from gradcheck.results import CaseResult, Hint

# Every op a program can grow through (not one_hot, whose only input is integer).
ALL = tuple(op.name for op in all_ops() if op.params[0] not in op.integer)
# The generator is fast and its examples small: many of them, no deadline; the same
# examples on every run (derandomize), as a fixed fuzz seed would give.
PROPERTY = settings(
    max_examples=150,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)


def case(expr: str, **inputs: object) -> Case:
    loaded = load_case({"name": "t", "expr": expr, "inputs": inputs})
    assert isinstance(loaded, Case), loaded
    return loaded


# -- generation ----------------------------------------------------------------------


@PROPERTY
@given(example=examples(Space(ALL)))
def test_generated_cases_are_valid_small_and_within_the_space(example):
    space = Space(ALL)
    case = example.case
    used = {n.op.name for n in case.expression.op_nodes if n.op is not None}
    assert used <= set(space.ops)
    assert 1 <= len(case.expression.op_nodes) <= space.max_ops * 3  # concat/stack of 3
    assert case.dtype in space.dtypes
    assert all(len(v.shape) <= space.max_rank + 1 for v in case.inputs.values())
    assert all(math.prod(n.shape) <= MAX_NODE_ELEMENTS for n in case.expression.nodes)
    assert case.cotangent.shape == case.expression.output.shape


@PROPERTY
@given(example=examples(Space(ALL)))
def test_generated_cases_are_fair(example):
    """Every op's arguments lie in its declared domain, finite and moderate, and a kinked
    op is never near its kink; exactly at it only when the inputs are integers."""
    case = example.case
    engine = BuiltinEngine()
    built = build_expression(engine, case.expression, case.inputs, set(), case.cotangent.dtype)
    values = {  # an op with several outputs has its values at its parts' nodes
        node: np.asarray(engine.value(t), dtype=np.float64)
        for node, t in built.items()
        if not node.is_multi
    }
    assert all(np.isfinite(v).all() and (np.abs(v) <= 100).all() for v in values.values())
    for node in case.expression.op_nodes:
        op, args = node.op, [values[a] for a in node.args]
        for param, interval in op.domain.items():
            assert np.all(interval.contains(args[op.params.index(param)])), node.text
        if op.kink:
            distance = kink_distance(node, args)
            near = distance < kink_gap(case.dtype)
            assert not (near & (distance != 0)).any(), node.text
            assert example.program.kinks or not near.any(), node.text


@PROPERTY
@given(example=examples(Space(ALL)))
def test_a_written_case_file_reads_back_as_the_checked_case(example, tmp_path_factory):
    program_case = example.case
    finding = _finding_of(example)
    path = tmp_path_factory.mktemp("out") / "case.yaml"
    path.write_text(case_file_text(finding, seed=3, options="", path=str(path)))
    (read,) = load_file(path)
    assert isinstance(read, Case), read
    assert read.expr == program_case.expr
    assert (read.dtype, read.seed, read.wrt) == (program_case.dtype, program_case.seed, read.wrt)
    assert read.inputs.keys() == program_case.inputs.keys()
    for name, value in program_case.inputs.items():
        assert read.inputs[name].dtype == value.dtype
        assert np.array_equal(read.inputs[name], value)  # bit for bit: a grid every dtype holds
    assert np.array_equal(read.cotangent, program_case.cotangent)


def _finding_of(example):
    from gradcheck.fuzzing.search import Finding

    result = CaseResult("fuzz", "<fuzz>", 1, "failed", hints=[Hint("op-vjp", "m", "f", "likely")])
    return Finding(("op-vjp", "mul"), example, result, 1, 0.0, 0.0, 0)


@pytest.mark.parametrize(
    ("ops", "features"),
    [
        (("add", "mul", "maximum"), ("same", "size-1", "leading", "scalar", "constant", "reuse")),
        (("matmul",), ("batch", "batch one side", "batch size-1", "reuse")),
        (("sum", "mean", "max"), ("axis=None", "one axis", "several axes", "negative axis",
                                  "keepdims", "at kinks")),
        (("take", "take_along_axis", "embedding", "sparse_softmax_cross_entropy"),
         ("indices", "repeated index", "negative axis")),
        (("split", "unstack", "slogdet", "mul"), ("one of outputs", "negative axis", "reuse")),
        (("prod",), ("whole numbers", "several axes", "keepdims")),
        (("transpose", "getitem", "softmax"), ("perm", "index", "negative axis")),
    ],
)  # fmt: skip
def test_generation_reaches_what_the_issue_lists(ops, features):
    """Broadcasting of every kind, batched matmul with the batch on one side and of size 1,
    reductions over none, one, several and negative axes with keepdims, shape ops and
    indexing, reuse, literals, kinks; over every dtype and both cotangents."""
    coverage = Coverage()
    cotangents = set()

    @settings(PROPERTY, max_examples=200)
    @given(example=examples(Space(ops)))
    def collect(example):
        coverage.add(example.case, example.program.kinks)
        cotangents.add(example.program.cotangent)

    collect()
    everything = sum((entry.features for entry in coverage.ops.values()), Counter())
    assert [f for f in features if not everything[f]] == []
    assert set(coverage.ops) == set(ops)
    assert set(coverage.dtypes) == {"float32", "float64"}
    assert cotangents == {"ones", "random"}


def test_the_first_ranks_of_an_op_come_from_its_shape_rule():
    assert first_ranks("matmul", 3) == (2, 3)
    assert first_ranks("matrix_transpose", 3) == (2, 3)
    assert first_ranks("add", 3) == (0, 1, 2, 3)
    assert first_ranks("softmax", 3) == (1, 2, 3)  # axis=-1 needs an axis


def test_completions_include_broadcast_batch_and_reduction_variants():
    matmuls = {c.rest[0].shape for c in completions("matmul", (2, 3, 2), (), 3)}
    assert {(2, 2, 2), (1, 2, 2)} <= matmuls  # the same batch axes, or broadcast from size 1
    assert {(2, 1), (2, 3)} <= matmuls  # the other operand 2-D: batch axes on one side only
    sums = [c.attrs for c in completions("sum", (2, 3), (), 3)]
    assert (("axis", -1),) in sums and (("axis", [0, 1]), ("keepdims", True)) in sums
    adds = {c.rest[0].shape for c in completions("add", (2, 3), (), 3)}
    assert {(2, 3), (1, 3), (2, 1), (3,), (), (2, 2, 3)} <= adds
    # An attribute the fuzzer has no notion of takes the op's declared choices (attr_choices).
    clips = {c.attrs for c in completions("clip", (2, 3), (), 3)}
    assert clips == {(("lo", lo), ("hi", hi)) for lo in (-1.0, 0.0) for hi in (0.5, 1.0)}
    # Every completion is valid by the op's own shape rule, with the output it names.
    for name in ("concat", "getitem", "reshape", "broadcast_to", "transpose", "squeeze"):
        op = get_op(name)
        for c in completions(name, (2, 1, 3), ((2, 1, 3), (3,)), 3):
            shapes = [(2, 1, 3), *(s.shape for s in c.rest)]
            attrs = {**op.attrs, **dict(c.attrs)}
            got = op.shape(shapes, **attrs) if op.variadic else op.shape(*shapes, **attrs)
            assert tuple(got) == c.shape


# -- what is written -----------------------------------------------------------------


def test_programs_render_as_expressions_that_parse_to_the_same_graph():
    x, y = Leaf((2,), (1.0, -1.0)), Leaf((), (2.0,))
    h = Apply(get_op("exp"), (x,), {}, (2,))
    diamond = Apply(get_op("mul"), (h, Apply(get_op("sin"), (h,), {}, (2,))), {}, (2,))
    neg = Apply(get_op("neg"), (Apply(get_op("add"), (x, y), {}, (2,)),), {}, (2,))
    power = Apply(get_op("pow"), (x, Literal(-1.0)), {}, (2,))
    index = Apply(get_op("getitem"), (neg,), {"index": (slice(None, None, -1),)}, (2,))
    reduce = Apply(get_op("sum"), (index,), {"axis": -1, "keepdims": True}, (1,))
    square = Apply(get_op("mul"), (x, x), {}, (2,))
    expected = {
        diamond: "h1 = exp(x)\nh1 * sin(h1)",
        neg: "-(x + y)",
        power: "x ** (-1)",
        reduce: "sum((-(x + y))[::-1], axis=-1, keepdims=True)",
        square: "x * x",
    }
    for output, text in expected.items():
        data = Program(output, "float64", "ones", 0, kinks=False).case_data()
        assert data["expr"] == text
        parsed = load_case(data)
        assert isinstance(parsed, Case), parsed.message
        assert parsed.expression.output.shape == output.shape


def test_case_names_say_which_bug():
    assert case_name(("fault:matmul.full-transpose", "matmul")) == "fault-matmul.full-transpose"
    assert case_name(("op-vjp", "exp")) == "op-vjp-exp"
    assert case_name(("error", "grad raised ValueError")) == "error-grad-raised-ValueError"
    assert describe(("op-vjp", "exp")) == "op-vjp (exp)" and describe(("kink", None)) == "kink"


def test_an_engine_error_is_one_bug_whatever_the_node_it_raised_at():
    expression_case = case("exp(x) * y", x=[1.0], y=[2.0])
    raised = CaseResult("c", "f", 1, "error", message="exp(x) raised ValueError: boom 3")
    assert bug_key(raised, expression_case) == ("error", "exp raised ValueError")
    returned = CaseResult("c", "f", 1, "error", message="grad returned 2 arrays for 3 wrt nodes")
    assert bug_key(returned, expression_case) == ("error", "grad returned N array for N wrt nodes")


# -- fair cases ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "inputs", "kinks", "fair"),
    [
        ("log(x)", {"x": [0.5, 2.0]}, False, True),
        ("log(x - y)", {"x": [0.5], "y": [1.0]}, False, False),  # out of log's domain
        ("x / y", {"x": [1.0], "y": [0.125]}, False, False),  # a denominator near 0
        ("exp(exp(x))", {"x": [1.5]}, False, False),  # 88: larger than moderate, and exp(4.5)
        ("relu(x * y - z)", {"x": [0.1], "y": [0.1], "z": [0.01]}, True, False),  # 1e-18 from 0
        ("relu(x - y)", {"x": [1.0], "y": [1.0]}, True, True),  # exactly at the kink ...
        ("relu(x - y)", {"x": [1.0], "y": [1.0]}, False, False),  # ... only when the target
        ("max(x)", {"x": [1.0, 1.0 + 1e-6]}, True, False),  # a near tie
        ("max(x)", {"x": [1.0, 1.0, 0.5]}, True, True),  # an exact tie
        ("max(x)", {"x": [2.0, 1.0, 0.5]}, False, True),  # one winner: no kink at all
        ("maximum(x, y)", {"x": [1.0], "y": [1.001]}, False, False),
        ("x ** y", {"x": [-1.0], "y": [2.0]}, False, False),  # pow keeps a positive base
    ],
)
def test_only_fair_cases_are_checked(expr, inputs, kinks, fair):
    if fair:
        assert admissible(case(expr, **inputs), kinks=kinks) is not None
    else:
        with pytest.raises(Unfair):
            admissible(case(expr, **inputs), kinks=kinks)


def test_kinks_an_engine_declares_its_own_convention_for_are_no_target():
    at_kink = case("relu(x - y)", x=[1.0], y=[1.0])
    assert admissible(at_kink, kinks=True, own_conventions=frozenset({"abs"})) is not None
    with pytest.raises(Unfair):
        admissible(at_kink, kinks=True, own_conventions=frozenset({"relu"}))


def test_domains_keep_every_vjp_finite():
    """Inside its declared domain, each op's builtin VJPs are finite (so neither
    engine nor reference can produce a NaN there that would be a false alarm)."""
    for op in (op for op in all_ops() if op.domain):
        grids = [_sample(op.domain.get(p, Interval())) for p in op.params]
        args = np.meshgrid(*grids)
        ans = op.forward(*args, **op.attrs)
        for vjp in op.vjps:
            with np.errstate(all="raise"):
                assert np.isfinite(vjp(np.ones_like(ans), ans, *args, **op.attrs)).all(), op.name


def _sample(interval: Interval) -> np.ndarray:
    values = np.linspace(max(interval.low, -3), min(interval.high, 3), 25)
    return values[np.abs(values) >= max(interval.gap, 1e-3)]


def test_a_domain_names_parameters_of_its_op():
    add = get_op("add")
    with pytest.raises(TypeError, match="unknown parameter 'c'"):
        type(add)(**{**add.__dict__, "name": "add2", "domain": {"c": Interval()}})


# -- the search ----------------------------------------------------------------------


def test_a_run_is_reproducible_from_its_seed():
    def once():
        run = fuzz_engine(_engine("MulSelf"), ops=["mul", "add"], budget=Budget(60), seed=7)
        return [(b.key, b.text) for b in run.bugs], run.search.examples

    assert once() == once()


def test_a_seeded_run_draws_the_same_whatever_else_the_process_imported(tmp_path, monkeypatch):
    # Hypothesis draws now and then a literal of any loaded module outside the standard
    # library and site-packages: a new engine file or an edit of gradcheck changed what a
    # seed found. Bytes, integers and strings are what the generator draws.
    def once():
        run = fuzz_engine(BuiltinEngine, ops=["mul", "add", "sum"], budget=Budget(60), seed=5)
        return run.search.coverage.to_dict()

    before = once()
    literals = ", ".join(f"{bytes([b, 255 - b])!r}, {b * 7919}, {str(b) * 3!r}" for b in range(64))
    (tmp_path / "literals_galore.py").write_text(f"LITERALS = [{literals}]\n")
    monkeypatch.syspath_prepend(tmp_path)
    __import__("literals_galore")
    assert once() == before


GATHERS = ["take", "take_along_axis", "embedding", "sparse_softmax_cross_entropy"]


def test_fuzzing_the_gathers_finds_a_scatter_that_drops_repeated_indices():
    """HIPS/autograd's issue #39: take's VJP added the gradient by a buffered fancy
    assignment; the fuzzer draws indices that repeat and shrinks to a case where one does.
    A correct engine, the builtin one, comes out clean over the same ops."""
    from planted_engines import TakeAddsBuffered

    run = fuzz_engine(TakeAddsBuffered, ops=["take"], budget=Budget(200, max_bugs=1), seed=0)
    assert len(run.bugs) == 1 and run.bugs[0].reproduced
    bug = run.bugs[0]
    assert bug.result.status == "failed" and bug.finding.key[1] == "take"
    found = bug.finding.example.case
    (indices,) = [v for v in found.inputs.values() if v.dtype == "int64"]
    values = indices.ravel().tolist()
    assert len(set(values)) < len(values)  # the smallest case still repeats an index
    clean = fuzz_engine(BuiltinEngine, ops=GATHERS, budget=Budget(120), seed=0)
    assert clean.bugs == [] and set(clean.search.coverage.ops) >= set(GATHERS)


def test_one_wrong_rule_is_one_bug_however_the_fuzzer_s_cases_show_it():
    """SPEC §10, one report per bug: take's buffered scatter shows as a scaled VJP alone,
    and under a zero-gradient or scaled pattern when take meets take; all one bug, the
    catalogue's take.overwrite (the run had found three)."""
    from planted_engines import TakeAddsBuffered

    run = fuzz_engine(TakeAddsBuffered, ops=["take"], budget=Budget(200), seed=0)
    assert [bug.key for bug in run.bugs] == [("fault:take.overwrite", "take")]


def test_fuzzing_split_finds_a_vjp_that_drops_an_output_s_cotangent():
    """An op with several outputs is generated one output at a time, indexed; a split
    whose VJP leaves the last piece's cotangent out is found when that piece is used."""
    from planted_engines import SplitDropsLast

    run = fuzz_engine(SplitDropsLast, ops=["split", "mul"], budget=Budget(200, max_bugs=1), seed=0)
    assert len(run.bugs) == 1 and run.bugs[0].reproduced
    found = run.bugs[0].finding.example.case.expr
    assert "split(" in found and "]" in found  # an output of split, by index
    assert (
        fuzz_engine(BuiltinEngine, ops=["split", "unstack", "slogdet"], budget=Budget(100)).bugs
        == []
    )


def test_the_budget_bounds_the_run():
    run = fuzz_engine(BuiltinEngine, ops=["add"], budget=Budget(40), seed=1)
    assert (run.search.examples, run.search.stopped, run.bugs) == (40, "max-examples", [])
    timed = fuzz_engine(BuiltinEngine, budget=Budget(10_000, seconds=0.0), seed=1)
    assert (timed.search.examples, timed.search.stopped) == (0, "time")
    first = fuzz_engine(_engine("MulSelf"), ops=["mul"], budget=Budget(200, max_bugs=1), seed=1)
    assert (len(first.bugs), first.search.stopped) == (1, "max-bugs")


def test_nothing_is_written_unless_asked(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run = fuzz_engine(_engine("MulSelf"), ops=["mul"], budget=Budget(30), seed=2)
    assert run.bugs and all(bug.path is None for bug in run.bugs)
    assert list(tmp_path.iterdir()) == []  # no .hypothesis/, no cache, no case file
    written = fuzz_engine(
        _engine("MulSelf"), ops=["mul"], budget=Budget(30), seed=2, out=tmp_path / "o"
    )
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == ["fault-mul.self.yaml"]
    assert [p.name for p in tmp_path.iterdir()] == ["o"]
    assert written.bugs[0].text == (tmp_path / "o" / "fault-mul.self.yaml").read_text()


def test_usage_errors_name_the_problem():
    with pytest.raises(UsageError, match="unknown op 'nosuch'"):
        supported_ops(BuiltinEngine, ["nosuch"])
    with pytest.raises(UsageError, match="cannot fuzz add"):
        supported_ops(_engine("matmul-only"), ["matmul", "add"])
    with pytest.raises(UsageError, match="dtype 'float8'"):
        fuzz_engine(BuiltinEngine, dtypes=["float8"], budget=Budget(1))
    assert supported_ops(_engine("matmul-only")).ops == ("matmul",)
    with pytest.raises(UsageError, match=r"cannot fuzz exp .* only raises NotImplementedError"):
        supported_ops(StubbedExp, ["exp", "add"])


class StubbedExp(BuiltinEngine):
    """The builtin engine with exp left as init-engine writes a method: a stub."""

    def exp(self, x):
        """exp(x) -> tf.exp: e ** x."""
        raise NotImplementedError


def test_an_engine_s_stubs_are_left_out_of_generation_and_listed():
    """SPEC §10: an op whose method only raises NotImplementedError is not generated (every
    case using it would be an error, not a bug) and is listed as not implemented."""
    from rich.console import Console

    from gradcheck.fuzzing.report import fuzz_to_dict, render_fuzz

    run = fuzz_engine(StubbedExp, ops=None, budget=Budget(30), seed=1)
    assert "exp" not in run.ops and "log" in run.ops and run.not_implemented == ("exp",)
    assert run.bugs == [] and "exp" not in run.search.coverage.ops
    assert fuzz_to_dict(run, tool_version="t")["not_implemented"] == ["exp"]
    console = Console(file=io.StringIO(), width=200)
    render_fuzz(run, console)
    assert "not implemented (NotImplementedError), left out: exp" in console.file.getvalue()


def _engine(name: str):
    from gradcheck.engines.loading import load_engine

    root = Path(__file__).resolve().parents[1]
    if name == "matmul-only":
        return load_engine(str(root / "examples" / "seed_engine.py"))
    return load_engine(f"{root / 'tests' / 'corpus' / 'tape_bugs.py'}:{name}")


def test_prod_is_fuzzed_at_zeros_on_purpose():
    """prod's gradient has its special cases at zeros (one zero, or two): a quarter of
    its cases draw whole numbers, so that a zero, when drawn, is exact."""
    whole, at_zeros = [], []

    @settings(PROPERTY, max_examples=150)
    @given(example=examples(Space(("prod",))))
    def collect(example):
        values = np.concatenate([np.ravel(v) for v in example.data["inputs"].values()])
        whole.append(example.program.kinks and bool(np.all(values == np.round(values))))
        at_zeros.append(example.program.kinks and bool((values == 0).any()))

    collect()
    assert sum(whole) >= 20 and sum(at_zeros) >= 1, (sum(whole), sum(at_zeros))
