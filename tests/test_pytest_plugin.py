"""The pytest plugin, driven through pytester: collection, outcomes, -k, -x, JUnit, xdist.

Runs that only collect stay in this process (fast, TensorFlow never imported); runs that
check cases go to a subprocess, where TensorFlow is imported the way a user's run does.
"""

from __future__ import annotations

import json
import shutil
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

# The loader (NumPy, PyYAML) is imported here, before pytester's in-process runs take
# their snapshot of sys.modules: a C extension such as NumPy must not be imported twice.
import gradcheck.cases
import gradcheck.runner.shards  # noqa: F401  (--gradcheck-shard's, likewise)

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]

# With the seed engine (matmul only, the full-transpose bug): `unbatched` passes (the
# bug hides in 2-D matmuls), `elementwise` is unsupported and skipped. The failing case
# is the seed's own, copied from cases/seed.yaml.
MINI = """\
cases:
  - name: unbatched
    expr: matmul(x, y)
    dtype: float32
    inputs:
      x: [[1.0, 2.0], [3.0, 4.0]]
      y: [[0.5, -1.0], [2.0, 1.5]]
    tags: [matmul]
  - name: elementwise
    expr: exp(x) * x
    dtype: float32
    inputs:
      x: [0.5, -1.0, 2.0]
"""

BAD = """\
cases:
  - name: fine
    expr: x * 2
    inputs: {x: [1.0, 2.0]}
  - name: broken
    expr: nosuchop(x)
    inputs: {x: [1.0]}
"""

SEED = "cases/seed.yaml::seed_batched_matmul_chain"
ENGINE = ("--gradcheck-engine", "seed_engine.py")


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    """A project with a case folder, the seed engine and unrelated YAML and tests."""
    pytester.makeini("[pytest]\n")
    cases = pytester.mkdir("cases")
    shutil.copy(ROOT / "cases" / "seed.yaml", cases / "seed.yaml")
    (cases / "mini.yaml").write_text(MINI)
    shutil.copy(ROOT / "examples" / "seed_engine.py", pytester.path / "seed_engine.py")
    tests = pytester.mkdir("tests")
    (tests / "test_plain.py").write_text("def test_plain():\n    pass\n")
    (tests / "settings.yaml").write_text("not: a case file\n")  # must never be collected
    return pytester


def collected(result: pytest.RunResult) -> list[str]:
    return [line for line in result.outlines if "::" in line and not line.startswith(" ")]


# --- collection ------------------------------------------------------------------------


def test_collects_one_item_per_case_named_file_and_case(project: pytest.Pytester) -> None:
    result = project.runpytest_inprocess("--gradcheck", "cases", "--collect-only", "-q")
    assert result.ret == pytest.ExitCode.OK
    assert collected(result) == [
        "cases/mini.yaml::unbatched",
        "cases/mini.yaml::elementwise",
        SEED,
    ]
    header = project.runpytest_inprocess("--gradcheck", "cases", "--collect-only")
    header.stdout.fnmatch_lines(["gradcheck: engine builtin (default), case files under cases, *"])


def test_not_activated_collects_no_yaml(project: pytest.Pytester) -> None:
    result = project.runpytest_inprocess("--collect-only", "-q", ".")
    assert collected(result) == ["tests/test_plain.py::test_plain"]
    # Even when pointed straight at case files, nothing is collected without opting in.
    result = project.runpytest_inprocess("--collect-only", "-q", "cases")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    assert collected(result) == []


def test_gradcheck_only_takes_yaml_under_the_given_paths(project: pytest.Pytester) -> None:
    result = project.runpytest_inprocess("--gradcheck", "--collect-only", "-q", "cases", "tests")
    # tests/settings.yaml is under a given path, so --gradcheck treats it as a case file
    # and reports it: opting in with a path means "these are case files".
    assert "tests/settings.yaml:1:" in result.stdout.str()
    result = project.runpytest_inprocess("--gradcheck", "--collect-only", "-q", SEED)
    assert collected(result) == [SEED]


def test_ini_paths_activate_and_join_testpaths(project: pytest.Pytester) -> None:
    project.makeini("[pytest]\ntestpaths = tests\ngradcheck_paths = cases\n")
    result = project.runpytest_inprocess("--collect-only", "-q")
    assert collected(result) == [
        "tests/test_plain.py::test_plain",
        "cases/mini.yaml::unbatched",
        "cases/mini.yaml::elementwise",
        SEED,
    ]
    # Paths on the command line win, as with testpaths; YAML outside gradcheck_paths
    # (tests/settings.yaml) is still not a case file.
    result = project.runpytest_inprocess("--collect-only", "-q", "tests")
    assert collected(result) == ["tests/test_plain.py::test_plain"]


def test_gradcheck_without_paths_reads_cases_folder(project: pytest.Pytester) -> None:
    project.makeini("[pytest]\ntestpaths = tests\n")
    result = project.runpytest_inprocess("--gradcheck", "--collect-only", "-q")
    assert SEED in collected(result)
    assert "tests/test_plain.py::test_plain" in collected(result)


def test_collecting_imports_no_tensorflow(project: pytest.Pytester) -> None:
    script = (
        "import sys, pytest\n"
        "pytest.main(['--gradcheck', 'cases', '--collect-only', '-q', '-p', 'no:cacheprovider'])\n"
        "print('tensorflow imported:', 'tensorflow' in sys.modules)\n"
    )
    result = project.run(sys.executable, "-c", script)
    assert SEED in result.outlines
    assert result.outlines[-1] == "tensorflow imported: False"


def test_k_selects_by_name_and_tag(project: pytest.Pytester) -> None:
    by_name = project.runpytest_inprocess(
        "--gradcheck", "cases", "--collect-only", "-q", "-k", "elementwise"
    )
    assert collected(by_name) == ["cases/mini.yaml::elementwise"]
    by_tag = project.runpytest_inprocess(
        "--gradcheck", "cases", "--collect-only", "-q", "-k", "matmul"
    )
    assert collected(by_tag) == ["cases/mini.yaml::unbatched", SEED]


def test_shards_split_the_cases_after_k_and_by_the_cached_durations(
    project: pytest.Pytester,
) -> None:
    def shard(spec: str, *args: str) -> list[str]:
        args = ("--gradcheck", "cases", "tests/test_plain.py", "--collect-only", "-q", *args)
        result = project.runpytest_inprocess(*args, "--gradcheck-shard", spec)
        assert result.ret == pytest.ExitCode.OK
        return collected(result)

    plain = "tests/test_plain.py::test_plain"  # not a case: every shard runs it
    mini = ["cases/mini.yaml::unbatched", "cases/mini.yaml::elementwise"]
    # No durations kept: round robin in collection order.
    assert shard("1/2") == [mini[0], SEED, plain]
    assert shard("2/2") == [mini[1], plain]
    assert shard("2/2", "-k", "matmul") == [SEED]  # what -k leaves is split
    cache = project.mkdir(".gradcheck_cache")
    durations = {mini[0]: 0.1, mini[1]: 0.1, SEED: 5.0}
    (cache / "durations.json").write_text(json.dumps(durations))
    assert shard("1/2") == [SEED, plain]  # the long case alone
    assert shard("2/2") == [*mini, plain]
    for spec in ("0/2", "3/2", "a/b"):
        result = project.runpytest_inprocess("--gradcheck", "cases", "--gradcheck-shard", spec)
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines(["*--gradcheck-shard*1 <= K <= N*"])


def test_invalid_case_file_is_a_collection_error_naming_file_and_line(
    project: pytest.Pytester,
) -> None:
    (project.path / "cases" / "bad.yaml").write_text(BAD)
    result = project.runpytest_inprocess("--gradcheck", "cases")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*ERROR collecting cases/bad.yaml*", "cases/bad.yaml:6: nosuchop(x): unknown op*"]
    )
    assert "Traceback" not in result.stdout.str()
    # The file's good case does not run either: the file is broken as a whole.
    assert "bad.yaml::fine" not in result.stdout.str()


def test_unusable_engine_fails_every_item_with_the_reason(project: pytest.Pytester) -> None:
    result = project.runpytest_inprocess(
        "--gradcheck", "cases/mini.yaml", "--gradcheck-engine", "missing.py"
    )
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["gradcheck: --gradcheck-engine missing.py: no such file"])


# --- running (subprocess: TensorFlow is imported) -----------------------------------------


def test_a_session_that_skipped_every_case_says_nothing_was_checked(
    project: pytest.Pytester,
) -> None:
    result = project.runpytest_subprocess("--gradcheck", "cases", *ENGINE, "-k", "elementwise")
    assert result.ret == pytest.ExitCode.OK  # as gradcheck run: skipped cases pass ...
    result.assert_outcomes(skipped=1, deselected=2)
    result.stdout.fnmatch_lines(["gradcheck: nothing was checked: the case was skipped"])


def test_outcomes_report_and_junit(project: pytest.Pytester) -> None:
    result = project.runpytest_subprocess(
        "--gradcheck", "cases", *ENGINE, "-rsf", "--junitxml=report.xml"
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=1, failed=1, skipped=1)
    out = result.stdout.str()
    # The failure is gradcheck's report, its best explanation first.
    section = out.split("gradcheck: seed_batched_matmul_chain", 1)[1]
    first = section.splitlines()[1]
    assert first.startswith("fault:matmul.full-transpose: ")
    assert "fix: swap only the last two axes" in section
    assert "FAILED  cases/seed.yaml:" in section
    assert "Traceback" not in out
    # Short summary: the headline for the failure, the case's own line for the skip.
    result.stdout.fnmatch_lines([f"FAILED {SEED} - fault:matmul.*"])
    assert "SKIPPED [1] cases/mini.yaml:9: unsupported: engine has no method for exp" in out
    result.stdout.fnmatch_lines(
        ["gradcheck: engine seed_engine.py (from --gradcheck-engine), case files under cases, *"]
    )
    assert "nothing was checked" not in out

    suite = ET.parse(project.path / "report.xml").getroot().find("testsuite")
    assert suite is not None
    cases = {(c.get("classname"), c.get("name")): c for c in suite.iter("testcase")}
    assert set(cases) == {
        ("cases.mini.yaml", "unbatched"),
        ("cases.mini.yaml", "elementwise"),
        ("cases.seed.yaml", "seed_batched_matmul_chain"),
    }
    failure = cases["cases.seed.yaml", "seed_batched_matmul_chain"].find("failure")
    assert failure is not None
    assert failure.get("message", "").startswith("fault:matmul.full-transpose")
    assert cases["cases.mini.yaml", "elementwise"].find("skipped") is not None


def test_strict_fails_unsupported_and_cache_dir_keeps_references(
    project: pytest.Pytester,
) -> None:
    strict = project.runpytest_subprocess(
        "--gradcheck",
        "cases/mini.yaml",
        *ENGINE,
        "--gradcheck-strict",
        "--gradcheck-cache-dir",
        "refs",
    )
    strict.assert_outcomes(passed=1, failed=1)
    strict.stdout.fnmatch_lines(["unsupported: *"])
    assert len(list((project.path / "refs").rglob("*.ref"))) == 2  # one per case
    # And each case's duration, for a later --gradcheck-shard to balance by.
    durations = json.loads((project.path / "refs" / "durations.json").read_text())
    assert sorted(durations) == ["cases/mini.yaml::elementwise", "cases/mini.yaml::unbatched"]


NEVER_ZEROED = """\
from gradcheck.engines.builtin import BuiltinEngine


class Engine(BuiltinEngine):
    totals = None

    def grad(self, output, wrt, cotangent):  # adds each backward pass onto the last
        fresh = super().grad(output, wrt, cotangent)
        self.totals = fresh if self.totals is None else [t + g for t, g in zip(self.totals, fresh)]
        return self.totals
"""


@pytest.mark.parametrize(("limit", "outcome"), [("4", "passed"), ("0", "failed")])
def test_stale_check_limit(project: pytest.Pytester, limit: str, outcome: str) -> None:
    """`unbatched` has 8 input elements: over a limit of 4 it is asked once."""
    (project.path / "never_zeroed.py").write_text(NEVER_ZEROED)
    result = project.runpytest_subprocess(
        "--gradcheck",
        "cases/mini.yaml",
        "-k",
        "unbatched",
        "--gradcheck-engine",
        "never_zeroed.py",
        "--gradcheck-stale-check-limit",
        limit,
    )
    result.assert_outcomes(**{outcome: 1})
    if outcome == "failed":
        result.stdout.fnmatch_lines(["*stale-gradients*"])


def test_x_stops_at_the_first_failure(project: pytest.Pytester) -> None:
    result = project.runpytest_subprocess(
        "--gradcheck", "cases/seed.yaml", "cases/mini.yaml", *ENGINE, "-x"
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*stopping after 1 failures*"])


def test_xdist(project: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    result = project.runpytest_subprocess("--gradcheck", "cases", *ENGINE, "-n", "2")
    result.assert_outcomes(passed=1, failed=1, skipped=1)
    result.stdout.fnmatch_lines(["*fault:matmul.full-transpose*"])

    # Each xdist worker computes the same split: shard 1 of 2 runs its two cases once,
    # and not the skipped one (the workers deselect it, which xdist's summary leaves out).
    # No cache: no durations from the run above, so the split is round robin.
    shard = project.runpytest_subprocess(
        "--gradcheck", "cases", *ENGINE, "-n", "2", "--gradcheck-shard", "1/2",
        "--gradcheck-no-cache",
    )  # fmt: skip
    shard.assert_outcomes(passed=1, failed=1, skipped=0)


# --- user-defined ops and the numeric reference -------------------------------------------


def test_user_ops_and_the_numeric_reference(project: pytest.Pytester) -> None:
    shutil.copy(ROOT / "examples" / "custom_op" / "smooth_relu_ops.py", project.path / "my_ops.py")
    (project.path / "cases" / "soft.yaml").write_text(
        "cases:\n  - name: soft\n    expr: smooth_relu(x) * x\n    inputs: {x: [0.5, -1.0]}\n"
    )
    args = ("--gradcheck", "cases/soft.yaml", "-p", "no:cacheprovider")
    missing = project.runpytest_inprocess(*args, "--collect-only", "-q")
    assert missing.ret == pytest.ExitCode.INTERRUPTED  # unknown op: a collection error
    result = project.runpytest_subprocess(
        *args, "--gradcheck-ops", "my_ops.py", "--gradcheck-reference", "numeric", "-v"
    )
    result.assert_outcomes(passed=1)
    broken = project.path / "broken_ops.py"
    broken.write_text(
        "import gradcheck\n\n@gradcheck.op(shape=gradcheck.same_shape)\n"
        "def relu(x):\n    return x\n"
    )
    refused = project.runpytest_inprocess(*args, "--gradcheck-ops", "broken_ops.py")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(["*gradcheck: broken_ops.py:3: op 'relu': shadows the builtin*"])


def test_a_crashing_engine_fails_its_item_and_the_session_goes_on(
    project: pytest.Pytester,
) -> None:
    shutil.copy(ROOT / "tests" / "hostile_engine.py", project.path / "hostile_engine.py")
    (project.path / "cases" / "hostile.yaml").write_text(
        "cases:\n"
        "  - name: crashes\n    expr: sum(segv * 2.0)\n    inputs: {segv: [1.0, 2.0]}\n"
        "  - name: fine\n    expr: sum(x * 2.0)\n    inputs: {x: [1.0, 2.0]}\n"
    )
    result = project.runpytest_subprocess(
        "--gradcheck", "cases/hostile.yaml", "--gradcheck-engine", "hostile_engine.py", "-rA"
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*crashes*the engine process was killed by SIGSEGV*"])
