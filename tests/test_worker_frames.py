"""A worker's reply pipe is untrusted (issue 22, item 2): whatever an engine writes to it,
pickles of every opcode class included, nothing runs in gradcheck's process, the case
it came with is an `error`, its neighbours still run, and the report is true."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import msgpack
import numpy as np
import pytest

from frame_engine import FRAMES
from gradcheck.results import CaseResult, Comparison, Hint, InputResult
from gradcheck.runner.workers.messages import Diagnosed
from gradcheck.runner.workers.replies import BadReply, pack, unpack

HERE = Path(__file__).resolve().parent
CLI = [sys.executable, "-c", "from gradcheck.cli import main; main()"]


def case(name: str, x: str) -> str:
    return f"  - name: {name}\n    expr: sum({x} * 2.0)\n    inputs: {{{x}: [1.0, 2.0]}}\n"


@pytest.fixture(scope="module")
def frames_run(tmp_path_factory) -> tuple[subprocess.CompletedProcess, dict, Path]:
    folder = tmp_path_factory.mktemp("frames")
    cases = [case("first", "x")]
    for name in FRAMES:  # each hostile case followed by a well-behaved one
        cases += [case(name, name), case(f"after_{name}", "x")]
    (folder / "frames.yaml").write_text("cases:\n" + "".join(cases))
    done = subprocess.run(
        [*CLI, "run", "frames.yaml", "-e", f"{HERE}/frame_engine.py", "--format", "json"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "NO_COLOR": "1"},
    )
    return done, json.loads(done.stdout), folder


def test_no_frame_runs_code_and_each_is_its_case_s_error(frames_run) -> None:
    done, report, folder = frames_run
    assert not list(folder.glob("MARKER*")), "a frame ran code in gradcheck's process"
    assert done.returncode == 1, done.stderr
    statuses = {c["name"]: c["status"] for c in report["cases"]}
    assert statuses == {
        "first": "passed",
        **{name: "error" for name in FRAMES},
        **{f"after_{name}": "passed" for name in FRAMES},
    }
    assert report["summary"]["error"] == len(FRAMES)
    assert report["summary"]["passed"] == len(FRAMES) + 1


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("global_reduce", "cannot read (not a reply"),
        ("old_reply", "cannot read (not a reply"),
        ("object_dtype", "an array of dtype 'object', not one of float16, bfloat16"),
        ("complex_dtype", "an array of dtype 'complex128'"),
        ("size_lies", "an array of shape [1000] in a buffer of 8 bytes"),
        ("text_as_array", "str 'os.system' where an array belongs"),
        ("unknown_kind", "unknown reply 'os.system'"),
        ("unknown_field", "EngineOutcome has no field __class__"),
        ("list_for_text", "list '[[[]]]' where a string belongs"),
        ("deep", "EngineOutcomes nested more than 32 deep"),
        ("deepest", "cannot read (not a reply"),
        ("huge_payload", "a frame of 4,611,686,018,427,387,904 bytes"),
        ("huge_count", "a frame of 4,294,967,295 buffers"),
        ("truncated", "the engine process exited with status 0 during grad()"),
    ],
)
def test_each_bad_frame_is_named_for_what_it_is(frames_run, name, words) -> None:
    _, report, _ = frames_run
    [found] = [c for c in report["cases"] if c["name"] == name]
    assert words in found["message"], found["message"]


def test_a_low_precision_diagnosis_crosses_the_pipe() -> None:
    """bfloat16 and float16 arrays (a low-precision case's comparisons) are replies'
    like any float: the old unpickler refused `ml_dtypes.bfloat16`, and the diagnosis
    of such a case was lost."""
    arrays = [np.array([0.5, -1.25], ml_dtypes.bfloat16), np.array([[1.5]], np.float16)]
    inputs = [
        InputResult(
            f"x{i}",
            Comparison("failed", a.shape, a.shape, 0.5, 1.0, 1, a.size, (0,), a, a * 2, 0.1, 0.0),
            [Hint("scaled", "twice", "halve it", "exact", op="mul", arg=0, factor=2.0)],
        )
        for i, a in enumerate(arrays)
    ]
    result = CaseResult("c", "c.yaml", 2, "failed", inputs=inputs, engine_dtype="bfloat16")
    payload, buffers = pack(Diagnosed(result, ["a note with a lone \ud800 surrogate"]))
    got = unpack(payload, [bytearray(b) for b in buffers])
    assert got.notes == ["a note with a lone \ud800 surrogate"]
    for sent, back in zip(inputs, got.result.inputs, strict=True):
        assert back.comparison.engine.dtype == sent.comparison.engine.dtype
        assert np.array_equal(back.comparison.engine, sent.comparison.engine)
        assert back.hints == sent.hints and back.comparison.worst_index == (0,)


@pytest.mark.parametrize(
    "fields",
    [
        {"name": "c", "file": "f", "line": 1, "status": "green"},  # not a status
        {"name": "c", "file": "f", "line": "1", "status": "failed"},  # a string for a number
        {"name": "c", "file": "f", "status": "failed"},  # a field missing
    ],
)
def test_a_reply_is_read_against_its_schema(fields) -> None:
    payload, _ = pack(Diagnosed(CaseResult("c", "f", 1, "failed"), []))
    kind, body = msgpack.unpackb(payload)
    assert isinstance(unpack(payload, []), Diagnosed)  # the honest reply reads
    body["result"] = fields
    with pytest.raises(BadReply):
        unpack(msgpack.packb([kind, body]), [])
