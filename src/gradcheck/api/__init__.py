"""The Python API: check one expression, or run case files, without the command line.

    import gradcheck

    result = gradcheck.check(
        "sum(x * y, axis=1)",
        {"x": {"shape": [2, 3]}, "y": [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]},
        engine=MyEngine,             # a class, a zero-argument factory or an --engine spec
        cotangent="random",          # any case-file key: wrt, dtype, tolerance, seed, ...
    )
    assert result.passed, result     # str(result) is the plain-text report
    result.inputs["x"].max_abs_diff  # per input: status, shapes, diffs, arrays, hints
    result.hints[0].code             # the best explanation, e.g. "fault:mul.self"

    report = gradcheck.run("cases/", engine="my_engine.py:Engine", keyword="matmul")
    assert report.passed, report     # every case's plain text, then the summary line

    found = gradcheck.fuzz(engine=MyEngine, max_examples=300, seed=0)
    assert found.passed, found       # each bug's diagnosis and its smallest case file
    found.cases[0].yaml              # a case file that reproduces the first bug

`check` builds its case with the case-file loader (`cases.loader.load_case`), so its
keyword options are validated exactly as a case file's keys are; a bad one raises
`InvalidCaseError` (a `GradcheckError`) saying what to change. Input values may be
numbers, nested lists, NumPy arrays (or anything `np.asarray` reads, such as another
framework's tensors) or a random spec ``{"shape": [...], "init": ..., "seed": ...}``.

Where the command line and the API differ:

* `CheckResult.passed` is true only for a case that passed: a check that was skipped
  (the engine does not support an op) checked nothing. `RunReport.passed` is the
  command line's exit code 0, so there skipped cases pass unless ``strict=True``
  (`nothing_checked` says when every case was skipped), and a run that found or
  selected no case does not pass (exit code 5; `nothing_found` says why).
* Defaults are the command line's, and so is the config file (``[tool.gradcheck]`` of
  the nearest pyproject.toml, or gradcheck.toml): a keyword left at None is the
  config file's, else the default. So the reference cache is on, in
  ``.gradcheck_cache/`` (``cache=False``: none), as it is for `gradcheck run`.
  `fuzz` keeps its own: no cache unless `cache_dir` is given.
* Where the engine runs (`isolate`): an ``--engine`` spec other than "builtin" runs in
  worker processes, as on the command line, so a crash, hang or `os._exit` in it is
  that case's error (with `timeout` seconds per case); an engine given as a Python
  object (a class, a factory) runs in the caller's process, since it is the caller's.
  ``isolate="process"`` runs a class in workers too, if it can be imported by name.

Importing `gradcheck` imports nothing heavy; NumPy, the runner and (when a reference
is computed) TensorFlow are imported on the first call. The calls are in `calls`, what
they return in `results`, how they take an engine in `engines`.
"""

from .calls import InvalidCaseError, check, fuzz, run
from .results import CheckResult, FoundCase, FuzzReport, InputCheck, RunReport

__all__ = [
    "CheckResult",
    "FoundCase",
    "FuzzReport",
    "InputCheck",
    "InvalidCaseError",
    "RunReport",
    "check",
    "fuzz",
    "run",
]
