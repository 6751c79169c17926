"""GitHub Actions annotations (``--format github``): one ``::error`` per case that did not pass.

Each failed, error or invalid case becomes a workflow command the runner turns into an
annotation on the case's line in the pull request::

    ::error file=cases/seed.yaml,line=23,title=gradcheck%3A seed_batched_matmul_chain::…

The message is the case's headline (its top hint's code and message, else its message),
the top hint's fix, and the run's root cause when other cases share it. Passing, skipped
and unrun cases get none. Control characters are shown as escapes
(`report.text.printable`); then values are escaped as the runner decodes them: ``%``,
CR and LF everywhere, and ``:`` and ``,`` in properties too. So an annotation is always
one line, and no text in it can start another workflow command. The file is the case's
path as given on the command line, with ``/`` separators: run gradcheck from the
repository root so that it is the path GitHub knows.
"""

from __future__ import annotations

from ..results import CaseResult, RunResult
from .rich_report import headline
from .rich_summary import citation
from .text import printable

ANNOTATED = ("failed", "error", "invalid")


def to_github(run: RunResult) -> str:
    """The annotations, one line each, newline-terminated; empty when every case passed."""
    return "".join(
        annotation(case, citation(run, case)) + "\n"
        for case in run.cases
        if case.status in ANNOTATED
    )


def annotation(case: CaseResult, cause: str | None = None) -> str:
    """The ``::error`` workflow command for one case (`cause`: the run's root cause it
    shares, `rich_summary.citation`)."""
    properties = {
        "file": printable(_path(case.file)),
        "line": str(max(case.line, 1)),
        "title": printable(f"gradcheck: {case.name}"),
    }
    props = ",".join(f"{key}={escape_property(value)}" for key, value in properties.items())
    return f"::error {props}::{escape_data(message(case, cause))}"


def message(case: CaseResult, cause: str | None = None) -> str:
    """What the annotation says: the headline, the top hint's fix, the run's cause."""
    text = headline(case)
    if case.hints:
        text += f"\nfix: {printable(case.hints[0].fix)}"
    if cause:
        text += f"\n{printable(cause)}"
    return text


def escape_data(text: str) -> str:
    """A workflow command's message: ``%``, CR and LF percent-encoded."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A workflow command's property value: as `escape_data`, and ``:`` and ``,`` too."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _path(file: str) -> str:
    path = file.replace("\\", "/")
    while path.startswith("./"):
        path = path[2:]
    return path
