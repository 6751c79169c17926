"""The loader never raises, and a run never crashes, whatever a case file holds.

Hypothesis writes case files whose third case has generated YAML values (odd tags,
aliases, huge numbers, nested junk) under generated keys, and generated expressions
(any op, any attribute, operators, subscripts, literals of every kind, comments with
control characters). Each file is run by the command line beside a file of valid
cases: no traceback, exit 0, 1 or 2, the valid cases all pass, and a generated case
is either valid or a `file:line` problem, never a loader crash. The example budget is
fixed and the examples derandomized, so every run of the suite checks the same files.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from gradcheck.cases import Case, InvalidCase, load_file
from gradcheck.cases.loader import CASE_KEYS, INTERNAL, SPEC_KEYS
from gradcheck.cli import app
from gradcheck.ops import Op, all_ops

EXAMPLES = 100  # per test

ODD_SCALARS = [
    "!!int abc", "!!float x", "!!bool maybe", "!!timestamp 2020-13-45", "!!binary aGk=",
    "!!python/object:os.system x", "!!set {a: null}", "!!omap [a: 1]", "!!str 3",
    "!!map x", "!!seq x", "!!null x", "2020-13-45", "2021-02-03", ".inf", "-.inf", ".nan",
    "~", "yes", "0x1F", "0o17", "1e400", "-1e-400", "1_000", "9" * 5000, "'quoted'",
    '"\\e[2J\\a"', "float64", "float32", "bfloat16", "ones", "random", "normal", "uniform",
    "integers", "positive", "[]", "{}", "''",
]  # fmt: skip
KEYS = [*CASE_KEYS, *SPEC_KEYS, "rtol", "atol", "x", "y", "<<", "junk"]
# Any text but lone surrogates, which no UTF-8 file can hold: control characters included.
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)


def quoted(text: str) -> str:
    """`text` as a YAML double-quoted scalar: what YAML may not hold raw, escaped."""

    def one(c: str) -> str:
        code = ord(c)
        if c in '"\\':
            return "\\" + c
        if 0x20 <= code <= 0x7E or 0xA0 <= code <= 0xD7FF or 0xE000 <= code <= 0xFFFD:
            return c
        return c if code > 0xFFFF else f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"

    return '"' + "".join(map(one, text)) + '"'


scalars = st.one_of(
    st.sampled_from(ODD_SCALARS),
    st.integers(min_value=-(10**40), max_value=10**40).map(str),
    st.floats().map(repr),
    TEXT.map(quoted),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4).map(lambda items: "[" + ", ".join(items) + "]"),
        st.dictionaries(st.sampled_from(KEYS), inner, max_size=4).map(
            lambda d: "{" + ", ".join(f"{k}: {v}" for k, v in d.items()) + "}"
        ),
    ),
    max_leaves=10,
)

literals = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.floats(allow_nan=False).map(repr),
    st.sampled_from(["1" + "0" * 400, "True", "None", "...", "'s'", "1j", "-0.0", "1e308"]),
)
# Attribute values: mostly the small whole numbers ops take, sometimes anything.
small = st.integers(min_value=-4, max_value=4).map(str)
attribute_values = st.one_of(
    small,
    st.lists(small, max_size=4).map(lambda items: "[" + ", ".join(items) + "]"),
    st.sampled_from(["True", "False", "None", "10**30", "1" + "0" * 30, "[1, [2]]", "1.5"]),
    literals,
)
names = st.sampled_from(["x", "y"])
atoms = st.one_of(names, names, names, st.sampled_from(["h", "undefined", "sum"]), literals)


def _call(op: str, args: list[str], attrs: list[tuple[str, str]]) -> str:
    return f"{op}({', '.join(args + [f'{k}={v}' for k, v in attrs])})"


def _op_call(op: Op, inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """A call of `op` with its own number of arguments (a list first for concat and stack)
    and some of its own attributes, or a made-up one."""
    args = (
        st.lists(inner, min_size=1, max_size=3).map(lambda a: ["[" + ", ".join(a) + "]"])
        if op.variadic
        else st.lists(inner, min_size=len(op.params), max_size=len(op.params))
    )
    names = st.sampled_from([*op.attrs, "bogus"])
    attrs = st.lists(st.tuples(names, attribute_values), max_size=2, unique_by=lambda t: t[0])
    return st.builds(_call, st.just(op.name), args, attrs)


def _expression(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(list(all_ops())).flatmap(lambda op: _op_call(op, inner)),
        st.builds(
            _call,
            st.sampled_from(["unknown_op", "eval", "__import__"]),
            st.lists(inner, max_size=2),
            st.just([]),
        ),
        st.builds(
            lambda a, op, b: f"({a} {op} {b})",
            inner,
            st.sampled_from(["+", "-", "*", "/", "**", "@", "//", "<", "and"]),
            inner,
        ),
        st.builds(lambda a: f"-{a}", inner),
        st.builds(
            lambda a, i: f"{a}[{i}]",
            inner,
            st.sampled_from(["0", "::2", "None", "...", "10**30", "1:1000000000000", "x", "-1"]),
        ),
        st.builds(lambda a: f"{a}.T", inner),
        st.builds(lambda a: f"lambda: {a}", inner),
    )


expressions = st.recursive(atoms, _expression, max_leaves=8)
sources = st.one_of(
    expressions,
    st.builds(lambda b, out: f"h = {b}\n{out}", expressions, expressions),
    st.builds(lambda e, junk: f"{e}  # {junk}", expressions, TEXT),
)


def case_file(expr: str, extra: dict[str, str], inputs: str | None) -> str:
    """Three cases, the second generated: its inputs (by default, those of x and y its
    expression names) and up to three more keys with generated values."""
    if inputs is None:
        known = {"x": "x: [1.0, 2.0]", "y": "y: {shape: [2]}"}
        used = [spec for name, spec in known.items() if re.search(rf"\b{name}\b", expr)]
        inputs = "{" + ", ".join(used or [known["x"]]) + "}"
    lines = ["cases:"]
    lines += ["  - name: first", "    expr: x * 2.0", "    inputs: {x: [1.0, 2.0]}"]
    lines += ["  - name: generated", f"    expr: {quoted(expr)}", f"    inputs: {inputs}"]
    lines += [f"    {key}: {value}" for key, value in extra.items() if key not in _OWN]
    lines += ["  - name: last", "    expr: sum(x)", "    inputs: {x: {shape: [2, 2]}}"]
    return "\n".join(lines) + "\n"


_OWN = ("name", "expr", "inputs")  # the generated case's own keys; extra ones are others

NEIGHBOURS = """\
cases:
  - name: neighbour
    expr: sum(tanh(x) * y)
    inputs: {x: {shape: [3]}, y: {shape: [3]}}
"""


def check_run(expr: str, extra: dict[str, str], inputs: str | None) -> None:
    """The case file loads without a loader crash, and runs without a crash of the run."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder, "generated.yaml")
        path.write_text(case_file(expr, extra, inputs), encoding="utf-8")
        neighbours = Path(folder, "neighbours.yaml")
        neighbours.write_text(NEIGHBOURS)

        items = load_file(path, max_elements=10_000)
        messages = [i.message for i in items if isinstance(i, InvalidCase)]
        assert not any(INTERNAL in m for m in messages), messages
        if len(items) == 3:  # the YAML parsed: the generated case spoils no other
            assert isinstance(items[0], Case) and isinstance(items[2], Case), messages
        args = ["run", str(path), str(neighbours), "--no-cache", "--format", "json"]
        result = CliRunner().invoke(app, [*args, "--max-elements", "10000"])
        assert result.exception is None or isinstance(result.exception, SystemExit), (
            result.exception
        )
        assert result.exit_code in (0, 1, 2), result.output
        report = json.loads(result.stdout)
        (neighbour,) = [c for c in report["cases"] if c["name"] == "neighbour"]
        assert neighbour["status"] == "passed"


BUDGET = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@BUDGET
@given(
    # Mostly the keys a case has, so that most cases get past their keys to their values.
    extra=st.dictionaries(st.sampled_from([*CASE_KEYS, *CASE_KEYS, *KEYS]), values, max_size=2),
    inputs=st.one_of(st.none(), values),
)
def test_any_values_load_and_run_without_a_crash(extra, inputs) -> None:
    check_run("sum(x * 2.0)", extra, inputs)


@BUDGET
@given(expr=sources)
def test_any_expression_loads_and_runs_without_a_crash(expr) -> None:
    check_run(expr, {}, None)
