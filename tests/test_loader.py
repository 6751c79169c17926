"""Case files: what a good file loads into, and every problem's message and line."""

from __future__ import annotations

import hashlib
import textwrap
from pathlib import Path

import numpy as np
import pytest

from gradcheck.cases import Case, InvalidCase, Tolerance, discover, load_file
from gradcheck.cases.inputs import PARALLEL_DRAW_ELEMENTS, RandomSpec, draw_all, stable_seed
from gradcheck.cases.loader import load_case
from gradcheck.errors import CaseFileError, UsageError

DATA = Path(__file__).parent / "data" / "loader"
GOOD = DATA / "good.yaml"

GOOD_CASE = """\
  - name: {name}
    expr: x * 2
    inputs: {{x: [1.0, 2.0]}}
"""


def write(tmp_path: Path, text: str, name: str = "cases.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def by_name(items: list[Case | InvalidCase]) -> dict[str, Case | InvalidCase]:
    return {item.name: item for item in items}


def sha256_seed(name: str) -> int:
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big") & (2**63 - 1)


# -- a good file -----------------------------------------------------------------------


@pytest.fixture
def good() -> dict[str, Case]:
    items = load_file(GOOD)
    assert all(isinstance(item, Case) for item in items), items
    return by_name(items)


def test_good_file_loads_every_case_in_order_with_its_line(good):
    assert list(good) == ["literal_defaults", "random_specs", "pinned.gradient-1"]
    assert [case.line for case in good.values()] == [8, 14, 28]
    assert all(case.file == str(GOOD) for case in good.values())


def test_literal_inputs_take_the_default_dtype_and_tolerance(good):
    case = good["literal_defaults"]
    assert case.dtype == "float32"
    assert case.inputs["x"].dtype == np.float32
    np.testing.assert_array_equal(case.inputs["x"], [[1.0, 2.0], [3.0, 4.0]])
    assert case.inputs["y"].shape == ()
    # rtol from float32's default, atol from the file's defaults (1e-4 is a YAML 1.2 float)
    assert case.tolerance == Tolerance(1.3e-6, 1e-4)
    assert case.wrt == ["x", "y"]
    assert case.tags == ["fixture"]
    assert case.description == "Literal inputs; dtype, atol and tags come from defaults."
    # The default cotangent is random (SPEC §2): seeded normal, in the case's dtype.
    assert case.cotangent.shape == (2, 2) and case.cotangent.dtype == np.float32
    assert not np.all(case.cotangent == 1.0)
    again = by_name(load_file(GOOD))["literal_defaults"]
    np.testing.assert_array_equal(case.cotangent, again.cotangent)  # seeded: the same
    assert case.expect == {}


def test_a_case_overrides_defaults(good):
    case = good["random_specs"]
    assert case.dtype == "float64"
    assert case.tolerance == Tolerance(1e-9, 1e-4)  # rtol its own, atol still the default's
    assert case.tags == ["random", "reduction"]
    assert case.wrt == ["a", "h"]
    assert case.expression.lookup("h").shape == (4, 3)
    assert case.expr == "h = a * b + c\nsum(h * d, axis=0)"


def test_random_inputs_follow_their_init(good):
    inputs = good["random_specs"].inputs
    assert all(value.shape == (4, 3) and value.dtype == np.float64 for value in inputs.values())
    assert inputs["b"].min() >= -1 and inputs["b"].max() < 1
    assert inputs["c"].min() >= 1 and inputs["c"].max() < 3
    d = inputs["d"]
    assert np.all(d == np.round(d)) and d.min() >= -3 and d.max() <= 3


def test_derived_seed_is_stable_and_differs_between_names(good):
    again = by_name(load_file(GOOD))
    for name in ("literal_defaults", "random_specs"):
        assert good[name].seed == again[name].seed == sha256_seed(name)
    assert good["literal_defaults"].seed != good["random_specs"].seed
    assert good["pinned.gradient-1"].seed == 42


def test_random_inputs_are_bit_identical_across_loads_and_differ_by_name(good):
    again = by_name(load_file(GOOD))["random_specs"]
    for name, value in good["random_specs"].inputs.items():
        assert value.tobytes() == again.inputs[name].tobytes()
    first = good["random_specs"]
    assert first.cotangent.tobytes() == again.cotangent.tobytes()
    assert not np.array_equal(first.inputs["a"], first.inputs["b"])
    # the same draw under another name is another stream
    assert not np.array_equal(
        RandomSpec(first.seed, "a", (4, 3)).draw(), RandomSpec(first.seed, "z", (4, 3)).draw()
    )


def test_random_stream_is_pinned():
    """The derivation must not change silently: saved cases would get other inputs."""
    assert RandomSpec(0, "x", (3,)).draw().tolist() == [
        0.2509060340095895, -0.3174809953065545, 1.7547717982293487
    ]  # fmt: skip
    assert RandomSpec(0, "x", (3,), "integers").draw().tolist() == [3.0, -1.0, 3.0]


def test_lower_precision_gets_the_float64_draw_rounded():
    wide = RandomSpec(7, "w", (5,), "uniform").draw()
    narrow = RandomSpec(7, "w", (5,), "uniform", dtype="float32").draw()
    assert narrow.dtype == np.float32
    np.testing.assert_array_equal(narrow, wide.astype(np.float32))


def test_spec_seed_overrides_the_case_seed(tmp_path):
    path = write(
        tmp_path,
        """\
        cases:
          - {name: one, expr: exp(x), inputs: {x: {shape: [3], seed: 9}}}
          - {name: two, expr: exp(x), inputs: {x: {shape: [3], seed: 9}}}
          - {name: three, expr: exp(x), inputs: {x: {shape: [3]}}}
        """,
    )
    one, two, three = (case.inputs["x"] for case in load_file(path))
    np.testing.assert_array_equal(one, two)
    assert not np.array_equal(one, three)


def test_cotangents(good):
    random_case = good["random_specs"]
    assert random_case.cotangent.shape == (3,)
    assert not np.all(random_case.cotangent == 1)
    pinned = good["pinned.gradient-1"]
    assert pinned.cotangent.shape == () and pinned.cotangent == 2.0
    assert pinned.cotangent.dtype == np.float32


def test_the_default_cotangent_is_random_and_ones_where_expect_is_pinned():
    """SPEC §2: random by default (a rule that ignores its upstream gradient passes under
    ones when its op is the output); a case that pins expect keeps ones, the cotangent
    pinned gradients are taken with (tape.gradient of the output)."""
    plain = load_case({"name": "c", "expr": "x * x", "inputs": {"x": [1.0, 2.0]}})
    pinned = load_case(
        {"name": "c", "expr": "x * x", "inputs": {"x": [1.0, 2.0]}, "expect": {"x": [2.0, 4.0]}}
    )
    said = load_case(
        {"name": "c", "expr": "x * x", "inputs": {"x": [1.0, 2.0]}, "cotangent": "ones"}
    )
    assert isinstance(plain, Case) and isinstance(pinned, Case) and isinstance(said, Case)
    assert not np.all(plain.cotangent == 1.0)
    np.testing.assert_array_equal(pinned.cotangent, [1.0, 1.0])
    np.testing.assert_array_equal(said.cotangent, [1.0, 1.0])


def test_expect_is_float64(good):
    expect = good["pinned.gradient-1"].expect
    assert list(expect) == ["x"] and expect["x"].dtype == np.float64
    np.testing.assert_array_equal(expect["x"], [4.0, -8.0])


def test_command_line_tolerance_replaces_every_case_s(good):
    items = by_name(load_file(GOOD, rtol=0.5))
    assert items["literal_defaults"].tolerance == Tolerance(0.5, 1e-4)
    assert items["random_specs"].tolerance == Tolerance(0.5, 1e-4)
    both = by_name(load_file(GOOD, rtol=0.0, atol=0.25))
    assert {case.tolerance for case in both.values()} == {Tolerance(0.0, 0.25)}


def test_file_is_named_as_given(tmp_path, monkeypatch):
    write(tmp_path, "cases:\n" + GOOD_CASE.format(name="a"), "relative.yaml")
    monkeypatch.chdir(tmp_path)
    (case,) = load_file("relative.yaml")
    assert case.file == "relative.yaml"
    assert case.location == "relative.yaml:2"


def test_cases_may_be_an_empty_list(tmp_path):
    assert load_file(write(tmp_path, "cases: []\n")) == []


# -- a bad case among good ones --------------------------------------------------------

# Each bad case is written between two good ones; `# <-` marks the line its error names.
BAD_CASES = {
    "python tag": (
        """\
        - name: bad
          expr: x
          inputs:
            x: !!python/object/apply:os.system ["echo owned"]  # <-
        """,
        "tag !!python/object/apply:os.system is not allowed",
    ),
    "unknown op": (
        """\
        - name: bad
          expr: frobnicate(x)  # <-
          inputs: {x: [1.0]}
        """,
        "frobnicate(x): unknown op 'frobnicate'",
    ),
    "attribute access": (
        """\
        - name: bad
          expr: x.T  # <-
          inputs: {x: [1.0]}
        """,
        "x.T: attribute access is not allowed",
    ),
    "lambda": (
        """\
        - name: bad
          expr: "(lambda: x)()"  # <-
          inputs: {x: [1.0]}
        """,
        "lambda is not allowed",
    ),
    "chained comparison": (
        """\
        - name: bad
          expr: where(0 < x < 1, x, 0.0)  # <-
          inputs: {x: [1.0]}
        """,
        "0 < x < 1: one comparison > >= < <= == or != at a time",
    ),
    "membership test": (
        """\
        - name: bad
          expr: x in x  # <-
          inputs: {x: [1.0]}
        """,
        "x in x: one comparison > >= < <= == or != at a time",
    ),
    "undefined name": (
        """\
        - name: bad
          inputs: {x: [1.0]}
          expr: x + y  # <-
        """,
        "undefined name 'y'",
    ),
    "shape error inside a block expr": (
        """\
        - name: bad
          expr: |

            h = matmul(x, w1)
            matmul(h, w2)  # <-
          inputs:
            x: {shape: [2, 3]}
            w1: {shape: [3, 4]}
            w2: {shape: [3, 5]}
        """,
        "matmul(h, w2): inner dimensions 4 and 3 differ",
    ),
    "syntax error in a block expr": (
        """\
        - name: bad
          expr: |
            h = x * 2
            h +  # <-
          inputs: {x: [1.0]}
        """,
        "syntax error",
    ),
    "ragged literal": (
        """\
        - name: bad
          expr: x
          inputs:
            x:
              - [1.0, 2.0]
              - [3.0]  # <-
        """,
        "input 'x' is ragged: [1] has shape (1,) but [0] has shape (2,)",
    ),
    "non-numeric literal": (
        """\
        - name: bad
          expr: x
          inputs:
            x: [1.0, "two"]  # <-
        """,
        "input 'x': 'two' at [1] is not a number",
    ),
    "unknown dtype": (
        """\
        - name: bad
          expr: x
          dtype: float8  # <-
          inputs: {x: [1.0]}
        """,
        "dtype 'float8' is not supported (allowed: float16, bfloat16, float32, float64)",
    ),
    "negative tolerance": (
        """\
        - name: bad
          expr: x
          tolerance:
            rtol: -1e-7  # <-
          inputs: {x: [1.0]}
        """,
        "tolerance rtol must be a number >= 0, got -1e-07",
    ),
    "duplicate case name": (
        """\
        - name: before  # <-
          expr: x
          inputs: {x: [1.0]}
        """,
        "duplicate case name 'before' (first on line 2)",
    ),
    "cotangent of the wrong shape": (
        """\
        - name: bad
          expr: sum(x, axis=0)
          inputs: {x: [[1.0, 2.0], [3.0, 4.0]]}
          cotangent: [1.0, 2.0, 3.0]  # <-
        """,
        "cotangent has shape (3,) but the output sum(x, axis=0) has shape (2,)",
    ),
    "input above the size cap": (
        """\
        - name: bad
          expr: x
          inputs:
            x: {shape: [100000, 1000]}  # <-
        """,
        "input 'x' has shape (100000, 1000), 100,000,000 elements: above the limit of "
        "10,000,000 per array (raise it with --max-elements)",
    ),
    "unknown key": (
        """\
        - name: bad
          expr: x
          inputs: {x: [1.0]}
          tolerence: {rtol: 1.0}  # <-
        """,
        "unknown key 'tolerence' in a case (did you mean 'tolerance'? allowed: name,",
    ),
    "wrt names no input": (
        """\
        - name: bad
          expr: x * y
          inputs: {x: [1.0], y: [2.0]}
          wrt:
            - x
            - z  # <-
        """,
        "wrt names 'z', which is neither an input nor a binding (known: x, y)",
    ),
    "expect of the wrong shape": (
        """\
        - name: bad
          expr: x * 2
          inputs: {x: [1.0, 2.0]}
          expect:
            x: [2.0]  # <-
        """,
        "expect 'x' has shape (1,) but x has shape (2,)",
    ),
    "expect names no wrt": (
        """\
        - name: bad
          expr: x * y
          inputs: {x: [1.0], y: [2.0]}
          wrt: [x]
          expect:
            y: [1.0]  # <-
        """,
        "expect names 'y', which is not in wrt (x)",
    ),
    "input named like an op": (
        """\
        - name: bad
          expr: exp + 1
          inputs:
            exp: [1.0]  # <-
        """,
        "input name 'exp' is an op's name",
    ),
    "input named like a keyword": (
        """\
        - name: bad
          expr: x
          inputs:
            x: [1.0]
            lambda: [1.0]  # <-
        """,
        "input name 'lambda' must be an identifier",
    ),
    "unused input": (
        """\
        - name: bad
          expr: x * 2
          inputs:
            x: [1.0]
            w: [1.0]  # <-
        """,
        "input 'w' is not used by the expression",
    ),
    "init normal with a range": (
        """\
        - name: bad
          expr: x
          inputs:
            x: {shape: [2], low: 0}  # <-
        """,
        "input 'x': init normal takes no low/high",
    ),
    "unknown init": (
        """\
        - name: bad
          expr: x
          inputs:
            x: {shape: [2], init: gaussian}  # <-
        """,
        "input 'x': unknown init 'gaussian' (allowed: normal, uniform, positive, integers)",
    ),
    "positive init reaching zero": (
        """\
        - name: bad
          expr: log(x)
          inputs:
            x: {shape: [2], init: positive, low: 0}  # <-
        """,
        "init positive: low must be above 0",
    ),
    "negative size": (
        """\
        - name: bad
          expr: x
          inputs:
            x: {shape: [2, -1]}  # <-
        """,
        "input 'x': a size in shape must be a whole number >= 0, got -1",
    ),
    "bad name": (
        """\
        - name: has space  # <-
          expr: x
          inputs: {x: [1.0]}
        """,
        "name 'has space' must be letters, digits",
    ),
    "missing expr": (
        """\
        - name: bad  # <-
          inputs: {x: [1.0]}
        """,
        "the case has no `expr:`",
    ),
    "key given twice": (
        """\
        - name: bad
          expr: x
          inputs: {x: [1.0]}
          expr: x * 2  # <-
        """,
        "key 'expr' given twice (first on line",
    ),
    "not a mapping": (
        """\
        - just a string  # <-
        """,
        "a case must be a mapping with name, expr and inputs",
    ),
}


@pytest.mark.parametrize("bad, message", BAD_CASES.values(), ids=BAD_CASES)
def test_a_bad_case_is_reported_at_its_line_and_the_others_load(tmp_path, bad, message):
    text = (
        "cases:\n"
        + GOOD_CASE.format(name="before")
        + textwrap.indent(textwrap.dedent(bad), "  ")
        + GOOD_CASE.format(name="after")
    )
    path = write(tmp_path, text)
    items = load_file(path)
    assert len(items) == 3
    before, invalid, after = items
    assert isinstance(before, Case) and before.name == "before"
    assert isinstance(after, Case) and after.name == "after"
    assert isinstance(invalid, InvalidCase), invalid
    assert message in invalid.message
    marked = [i for i, line in enumerate(text.splitlines(), 1) if line.endswith("# <-")]
    assert invalid.location == f"{path}:{marked[0]}"


def test_an_invalid_case_keeps_its_name_and_expr(tmp_path):
    path = write(tmp_path, "cases:\n  - {name: named, expr: x + y, inputs: {x: 1}}\n")
    (invalid,) = load_file(path)
    assert (invalid.name, invalid.expr) == ("named", "x + y")


def test_a_nameless_case_is_named_after_its_file_and_line(tmp_path):
    (invalid,) = load_file(write(tmp_path, "cases:\n  - {expr: x, inputs: {x: 1}}\n", "f.yaml"))
    assert (invalid.name, invalid.line) == ("f#2", 2)
    assert invalid.message == "the case has no `name:`"


@pytest.mark.parametrize(("init", "low", "high"), [("uniform", -0.1, 0.1), ("positive", 0.5, 2.0)])
def test_uniform_draws_are_numpys_uniform_bit_for_bit(init, low, high):
    drawn = RandomSpec(11, "w", (1000,), init, low, high).draw()
    stream = np.random.SeedSequence([11, stable_seed("w")])
    numpy_uniform = np.random.Generator(np.random.PCG64(stream)).uniform(low, high, 1000)
    assert drawn.tobytes() == numpy_uniform.tobytes()


def test_large_draws_on_threads_give_the_numbers_drawn_one_by_one():
    size = PARALLEL_DRAW_ELEMENTS // 2 + 1  # two of them: drawn on threads
    specs = {
        "x": RandomSpec(3, "x", (size,), "uniform", -2.0, 2.0, "float32"),
        "y": RandomSpec(3, "y", (size,)),
        "n": np.arange(3.0),  # an array given as it is passes through
    }
    drawn = draw_all(specs)
    assert list(drawn) == ["x", "y", "n"]
    assert drawn["x"].dtype == np.float32 and drawn["x"].shape == (size,)
    np.testing.assert_array_equal(
        drawn["x"], RandomSpec(3, "x", (size,), "uniform", -2, 2, "float32").draw()
    )
    np.testing.assert_array_equal(drawn["y"], RandomSpec(3, "y", (size,)).draw())
    assert drawn["n"] is specs["n"]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("{shape: [2], init: uniform, low: -1.0e308, high: 1.0e308}", "too wide to draw from"),
        ("{shape: [2], init: integers, low: 0, high: 1.0e30}", "must fit in 64 bits"),
    ],
)
def test_ranges_numpy_cannot_draw_from_are_case_errors(tmp_path, spec, message):
    path = write(tmp_path, f"cases:\n  - {{name: a, expr: x, inputs: {{x: {spec}}}}}\n")
    (invalid,) = load_file(path)
    assert isinstance(invalid, InvalidCase) and message in invalid.message


def test_input_size_cap_refuses_before_allocating(tmp_path, monkeypatch):
    def no_draw(*args, **kwargs):
        raise AssertionError("allocated an input above the cap")

    monkeypatch.setattr(RandomSpec, "draw", no_draw)
    path = write(tmp_path, "cases:\n  - {name: a, expr: x, inputs: {x: {shape: [10, 10]}}}\n")
    (invalid,) = load_file(path, max_elements=99)
    assert "above the limit of 99" in invalid.message


def test_size_cap_applies_to_literal_inputs(tmp_path):
    path = write(tmp_path, "cases:\n  - {name: a, expr: x, inputs: {x: [1, 2, 3]}}\n")
    (invalid,) = load_file(path, max_elements=2)
    assert isinstance(invalid, InvalidCase)
    assert "has shape (3,), 3 elements: above the limit of 2 per array" in invalid.message


def test_size_cap_applies_to_every_node_of_the_expression(tmp_path):
    path = write(
        tmp_path,
        """\
        cases:
          - name: outer
            expr: |
              y = x * 2
              y[:, None] * y[None, :]
            inputs: {x: {shape: [40]}}
        """,
    )
    (invalid,) = load_file(path, max_elements=1000)
    assert isinstance(invalid, InvalidCase) and invalid.line == 5
    assert invalid.message.startswith("y[:, None] * y[None, :] has shape (40, 40), 1,600 elements")
    (case,) = load_file(path, max_elements=1600)
    assert isinstance(case, Case)


@pytest.mark.parametrize(
    "expr",
    ["+".join(["x"] * 5000), "-" * 5000 + "x", "exp(" * 1000 + "x" + ")" * 1000],
    ids=["long sum", "deep negation", "deep calls"],
)
def test_a_deep_expression_is_an_error_not_a_crash(tmp_path, expr):
    path = write(tmp_path, f"cases:\n  - name: deep\n    expr: {expr}\n    inputs: {{x: 1.0}}\n")
    (invalid,) = load_file(path)
    assert isinstance(invalid, InvalidCase)
    assert "nested" in invalid.message and invalid.line == 3


# -- a file that is not a case file ----------------------------------------------------

FILE_ERRORS = {
    "empty": (b"", 1, "the file is empty"),
    "only comments": (b"# nothing yet\n", 1, "the file is empty"),
    "binary": (b"\x89PNG\r\n\x1a\n\x00\x00\x00", 1, "not a text file"),
    "not UTF-8": (b"cases: \xff\xfe\n", 1, "not a text file"),
    "YAML syntax": (b"cases:\n  - name: a\n   expr: [\n", 3, "YAML syntax error"),
    "a list at the top": (b"- name: a\n", 1, "the top level must be a mapping"),
    "unknown top-level key": (b"cases: []\ncase: []\n", 2, "unknown key 'case' at the top level"),
    "no cases": (b"defaults: {dtype: float32}\n", 1, "no `cases:` list"),
    "cases not a list": (b"cases:\n  name: a\n", 2, "`cases:` must be a list"),
    "cases twice": (b"cases: []\ncases: []\n", 2, "key 'cases' given twice (first on line 1)"),
    "case-only key in defaults": (
        b"defaults:\n  expr: x\ncases: []\n",
        2,
        "unknown key 'expr' in defaults "
        "(allowed: dtype, tolerance, cotangent, seed, tags, reference, timeout, modes, order)",
    ),
    "bad default": (b"defaults:\n  dtype: int8\ncases: []\n", 2, "dtype 'int8' is not supported"),
    "tag in defaults": (b"defaults:\n  seed: !!python/name:os.getpid\ncases: []\n", 2, "tag"),
    "deep YAML": (b"cases: " + b"[" * 5000 + b"]" * 5000, 1, "nest"),
}


@pytest.mark.parametrize("data, line, message", FILE_ERRORS.values(), ids=FILE_ERRORS)
def test_a_file_that_cannot_be_read_is_one_invalid_case(tmp_path, data, line, message):
    path = tmp_path / "broken.yaml"
    path.write_bytes(data)
    (invalid,) = load_file(path)
    assert isinstance(invalid, InvalidCase)
    assert (invalid.name, invalid.file, invalid.line) == ("broken", str(path), line)
    assert message in invalid.message


def test_a_folder_read_as_a_file_is_one_invalid_case(tmp_path):
    (invalid,) = load_file(tmp_path)
    assert invalid.message.startswith("not a regular file (a folder)")


def test_merge_keys_are_allowed_and_own_keys_win(tmp_path):
    path = write(
        tmp_path,
        """\
        cases:
          - &base {name: base, expr: x * 2, inputs: {x: [1.0]}, dtype: float32}
          - <<: *base
            name: merged
        """,
    )
    base, merged = load_file(path)
    assert isinstance(base, Case) and isinstance(merged, Case)
    assert (merged.name, merged.dtype, merged.line) == ("merged", "float32", 3)


# -- discover --------------------------------------------------------------------------


def test_discover_searches_folders_in_a_stable_order(tmp_path, monkeypatch):
    for name in ["b.yaml", "a.yml", "notes.txt", "sub/c.yaml", "sub/deeper/d.yaml", "z/e.yaml",
                 ".hidden/x.yaml", ".skip.yaml"]:  # fmt: skip
        (tmp_path / "cases" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "cases" / name).write_text("cases: []\n")
    (tmp_path / "extra.txt").write_text("cases: []\n")
    monkeypatch.chdir(tmp_path)
    found = discover(["cases", "extra.txt", "cases/b.yaml"])
    assert [str(p) for p in found] == [
        "cases/a.yml",
        "cases/b.yaml",
        "cases/sub/c.yaml",
        "cases/sub/deeper/d.yaml",
        "cases/z/e.yaml",
        "extra.txt",
    ]


def test_discover_refuses_a_missing_path(tmp_path):
    with pytest.raises(CaseFileError, match="no-such-dir: no such file or folder"):
        discover([tmp_path / "no-such-dir"])
    assert issubclass(CaseFileError, UsageError)


def test_shipped_case_files_load_cleanly():
    files = discover([Path(__file__).parents[1] / "cases"])
    invalid = [item for path in files for item in load_file(path) if isinstance(item, InvalidCase)]
    assert invalid == []


def test_a_case_from_python_keeps_its_array_as_it_was_given():
    """Arrays are drawn when the case runs (reading builds none); one passed to
    `load_case` is copied on loading, so a caller changing theirs afterwards changes
    nothing, and drawn in the case's dtype."""
    x = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    case = load_case({"name": "given", "expr": "x * 2", "inputs": {"x": x}, "dtype": "float64"})
    assert isinstance(case, Case), case
    x[0, 0] = 99.0
    np.testing.assert_array_equal(case.inputs["x"], [[1.0, 2.0], [3.0, 4.0]])
    assert case.inputs["x"].dtype == np.float64
