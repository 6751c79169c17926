"""Every fix says what to write, not only what is wrong (SPEC §6.1).

Every hint code gradcheck can give is produced here, from the corpus's planted bugs and
a few engines made for the codes the corpus does not reach, and each hint's fix must
(a) hold code to write, in backticks, that its message does not already show, and
(c) for a localised rule (op-vjp, kink, a fault of one op), state the registry's correct
rule, in TensorFlow spelling too for an engine that builds TensorFlow ops.
"""

from __future__ import annotations

import re
import tempfile
from functools import cache
from pathlib import Path

import pytest

from corpus import BUGS
from engines_for_tests import load_cases
from gradcheck.cases import load_file
from gradcheck.ops import get_op
from gradcheck.results import Hint
from gradcheck.runner import RunOptions, run
from spec_contract import SPEC_HINT_CODES
from test_conventions import CORPUS, KINK_CASES, quietly
from test_corpus import bug_case, engine
from test_dtypes import FLOAT64_CASE, TapeFloat32

# Codes beside SPEC §6's table: a declared convention's note.
CODES = (*SPEC_HINT_CODES, "convention")


def every_hint(hints: list[Hint]):
    for hint in hints:
        yield hint
        yield from every_hint(hint.also)


@cache
def produced() -> list[tuple[str, Hint]]:
    """(where, hint) for every hint of every corpus bug and of the extra engines."""
    found = []
    for bug in BUGS:
        [case] = run([bug_case(bug)], engine(bug.engine), RunOptions()).cases
        for item in [case, *case.inputs]:
            found += [(bug.id, h) for h in every_hint(item.hints)]
    extra = []
    # precision, from a float32 engine on a float64 case
    float64 = load_cases(Path(tempfile.mkdtemp()), FLOAT64_CASE)
    extra += run(float64, TapeFloat32, RunOptions()).cases
    # convention notes, from an engine that declares its conventions
    kinks = [c for path in KINK_CASES for c in load_file(path)]
    extra += quietly(kinks, engine(f"{CORPUS}:TapeSplit")).cases
    for case in extra:
        for item in [case, *case.inputs]:
            found += [(case.name, h) for h in every_hint(item.hints)]
    return found


def test_every_hint_code_is_produced():
    codes = {h.code for _, h in produced()}
    named = {c for c in CODES if not c.startswith("fault:")}
    assert named <= codes, named - codes
    assert any(c.startswith("fault:backprop.") for c in codes)
    assert len({c for c in codes if c.startswith("fault:")}) >= 30


CODE_SPAN = re.compile(r"`[^`]+`")


@pytest.mark.parametrize("code", sorted({h.code for _, h in produced()}))
def test_no_fix_only_restates_the_problem(code):
    for where, hint in produced():
        if hint.code != code:
            continue
        spans = CODE_SPAN.findall(hint.fix)
        assert spans, (where, hint.fix)  # code to write ...
        assert any(span not in hint.message for span in spans), (where, hint.fix)  # ... new
        assert hint.fix.strip() not in hint.message, (where, hint.fix)


def test_a_localised_fix_states_the_correct_rule_in_the_engines_spelling():
    checked = 0
    for where, hint in produced():
        if hint.code not in ("op-vjp", "kink") or hint.op is None or hint.arg is None:
            continue
        op = get_op(hint.op)
        assert f"`{op.rule(hint.arg)}`" in hint.fix, (where, hint.fix)
        if where.startswith("tfop:") and op.rule(hint.arg, "tensorflow") != op.rule(hint.arg):
            assert f"`{op.rule(hint.arg, 'tensorflow')}`" in hint.fix, (where, hint.fix)
        checked += 1
    assert checked > 50


def test_every_localised_hint_carries_its_mechanism():
    localised = [(w, h) for w, h in produced() if h.code in ("op-vjp", "kink")]
    assert localised
    for where, hint in localised:
        assert hint.mechanism, (where, hint.message)
        assert hint.to_dict()["mechanism"] == hint.mechanism


def test_the_engines_idiom_comes_from_its_imports_or_its_arrays():
    from gradcheck.diagnosis import idiom
    from gradcheck.engines.builtin.engine import BuiltinEngine
    from gradcheck.engines.driver import EngineRun
    from test_corpus import engine as corpus_engine

    tfop = corpus_engine("tests/corpus/tfop_engine.py:Engine")
    assert idiom.spelling(idiom.frameworks(tfop)) == "tensorflow"  # it imports tensorflow
    tape = corpus_engine("tests/corpus/tape_engine.py:Engine")
    assert idiom.spelling(idiom.frameworks(tape)) == "numpy"
    returned_tf = EngineRun(None, {}, array_module="tensorflow")  # its arrays say so
    assert idiom.spelling(idiom.frameworks(BuiltinEngine, returned_tf)) == "tensorflow"
    assert "numpy" in idiom.frameworks(tape)
