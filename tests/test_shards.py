"""`run --shard K/N` and `gradcheck merge` (issue 24): the split is disjoint, complete and
stable, balanced by the durations the cache keeps; shards merged are the run unsplit."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gradcheck.cli import app
from gradcheck.runner.shards import case_id, read_durations, shard

ROOT = Path(__file__).resolve().parents[1]
FAULTY = f"{ROOT / 'tests' / 'planted_engines.py'}:TanhFromInput"  # tanh's VJP wrong


def suite(folder: Path) -> Path:
    """Twelve cases, four through tanh (failing under FAULTY), one invalid."""
    lines = ["cases:"]
    for i in range(12):
        expr = "sum(tanh(x))" if i % 3 == 0 else f"sin(x) * {i}.0"
        expr = "nosuchop(x)" if i == 10 else expr
        lines += [f"  - name: c{i}", f'    expr: "{expr}"', "    dtype: float64"]
        lines += ["    inputs:", f"      x: {{shape: [{i % 4 + 2}]}}"]
    path = folder / "suite.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def invoke(*args: object):
    result = CliRunner().invoke(app, [str(a) for a in args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


@pytest.mark.parametrize("spec", ["0/3", "3/2", "a/b", "1/0", "-1/2", "1/2/3", ""])
def test_a_malformed_shard_is_a_usage_error(tmp_path: Path, spec: str) -> None:
    result = invoke("run", suite(tmp_path), "--shard", spec, "--reference", "numeric")
    assert result.exit_code == 2, result.output
    assert "--shard" in result.stderr and "1 <= K <= N" in result.stderr


class Item:
    def __init__(self, name: str) -> None:
        self.file, self.name = "cases.yaml", name


@pytest.mark.parametrize("n", [1, 2, 3, 5, 40])
@pytest.mark.parametrize("timed", [False, True])
def test_the_shards_are_disjoint_complete_and_stable(n: int, timed: bool) -> None:
    items = [Item(f"case{i}") for i in range(37)]
    durations = {case_id(item): (i * 7919) % 13 / 10 for i, item in enumerate(items)}
    durations = durations if timed else {}
    parts = [shard(items, k, n, durations) for k in range(1, n + 1)]
    assert sorted(id(i) for part in parts for i in part) == sorted(id(i) for i in items)
    assert parts == [shard(items, k, n, durations) for k in range(1, n + 1)]
    for part in parts:  # each in the run's order
        assert part == sorted(part, key=items.index)
    if timed:  # balanced: no shard heavier than the lightest plus the longest case
        loads = [sum(durations[case_id(i)] for i in part) for part in parts]
        assert max(loads) - min(loads) <= max(durations.values()) + 1e-9
    else:  # nothing timed: round robin
        assert [item.name for item in parts[0]] == [f"case{i}" for i in range(0, 37, n)]


def test_three_shards_merged_are_the_run_unsplit(tmp_path: Path) -> None:
    cases, cache = suite(tmp_path), tmp_path / "cache"
    common = ["--engine", FAULTY, "--reference", "numeric", "--cache-dir", cache, "-q"]
    whole = invoke("run", cases, *common, "--output", tmp_path / "whole.json")
    assert whole.exit_code == 2  # the invalid case
    timed = read_durations(cache)
    assert len(timed) == 11  # every case that ran, for the next split to balance by

    shards = []
    for k in (1, 2, 3):
        out = tmp_path / f"shard{k}.json"
        result = invoke("run", cases, *common, "--shard", f"{k}/3", "--output", out)
        assert result.exit_code in (0, 1, 2), result.output
        shards.append(out)
    assert read_durations(cache) == timed  # a shard records none: every shard reads the same
    counts = [len(json.loads(p.read_text())["cases"]) for p in shards]
    assert sum(counts) == 12 and min(counts) >= 1  # by time: the first case pays the start-up

    merged = tmp_path / "merged.json"
    result = invoke("merge", *shards, "-o", merged)
    assert result.exit_code == whole.exit_code == 2, result.output
    one, many = json.loads((tmp_path / "whole.json").read_text()), json.loads(merged.read_text())

    # The verdicts, not each case's hints: under --diagnose=first a case that an earlier
    # case's fingerprint explains is not probed again, and which cases come earlier differs.
    def verdicts(report: dict) -> list:
        return [(c["id"] if "id" in c else c["name"], c["status"],
                 [(i["name"], i["status"], i["max_abs_diff"]) for i in c["inputs"]])
                for c in report["cases"]]  # fmt: skip

    assert verdicts(many) == verdicts(one)
    assert many["summary"]["root_causes"] == one["summary"]["root_causes"]
    assert many["summary"]["root_causes"][0]["hint"]["code"] == "fault:tanh.from-input"
    assert len(many["summary"]["root_causes"][0]["cases"]) == 4  # across the shards
    assert many["summary"]["ops"] == one["summary"]["ops"]  # the report card, recomputed
    assert "4 failed" in result.stdout

    invoke("merge", *shards, "-o", tmp_path / "merged.xml")
    suite_xml = ET.parse(tmp_path / "merged.xml").getroot()
    assert len(suite_xml.findall(".//testcase")) == 12
    invoke("merge", *shards, "-o", tmp_path / "merged.html")
    assert "tanh.from-input" in (tmp_path / "merged.html").read_text()


def test_merge_refuses_other_runs_and_a_case_twice(tmp_path: Path) -> None:
    cases = suite(tmp_path)
    common = ["--reference", "numeric", "--no-cache", "-q", "-f", "json"]
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    invoke("run", cases, *common, "--shard", "1/2", "-o", first)
    invoke("run", cases, *common, "--shard", "2/2", "-o", second)

    twice = invoke("merge", first, first)
    assert twice.exit_code == 2
    assert f"is in two reports, {first} and {first}" in twice.stderr

    other = json.loads(second.read_text())
    other["version"] = "0.0.1"
    second.write_text(json.dumps(other))
    refused = invoke("merge", first, second)
    assert refused.exit_code == 2 and "--force" in refused.stderr
    assert "gradcheck 0.0.1" in refused.stderr
    forced = invoke("merge", first, second, "--force", "-o", tmp_path / "m.json")
    assert forced.exit_code == 2  # the invalid case, as one run
    assert len(json.loads((tmp_path / "m.json").read_text())["cases"]) == 12

    (tmp_path / "junk.json").write_text("{}")
    assert invoke("merge", tmp_path / "junk.json").exit_code == 2
