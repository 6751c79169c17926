"""JUnit XML (SPEC §7) for CI servers: one testcase per case, the rich report as its text
(citing the run's root cause a failure shares with other cases).

What the engine printed during a case is its ``<system-out>``. Control characters are
shown as escapes (XML 1.0 could not hold most of them anyway), and no line of the
document starts a GitHub Actions workflow command (`report.text`).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from ..results import CaseResult, RunResult
from .rich_report import headline, plain_text
from .rich_summary import citation
from .text import no_workflow_commands, printable

# XML 1.0 cannot hold most control characters at all (not even escaped), and engine
# tracebacks may carry ANSI colour codes; ElementTree would write them verbatim.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def to_junit(run: RunResult) -> str:
    """The run as a JUnit XML document (failed -> failure; error, invalid -> error)."""
    counts = {
        "tests": str(len(run.cases)),
        "failures": str(run.count("failed")),
        "errors": str(run.count("error") + run.count("invalid")),
        "skipped": str(run.count("skipped") + run.count("not run")),
        "time": _seconds(run.duration_s),
    }
    root = ET.Element("testsuites", {"name": "gradcheck", **counts})
    suite = ET.SubElement(root, "testsuite", {"name": _clean(f"gradcheck[{run.engine}]"), **counts})
    properties = ET.SubElement(suite, "properties")
    for name, value in (("engine", run.engine), ("reference", run.reference)):
        ET.SubElement(properties, "property", {"name": name, "value": _clean(value)})
    for case in run.cases:
        suite.append(_testcase(case, citation(run, case)))
    ET.indent(root)
    return no_workflow_commands(ET.tostring(root, encoding="unicode", xml_declaration=True))


def _testcase(case: CaseResult, cause: str | None) -> ET.Element:
    """One case; a failure's message and text cite the run's root cause it shares."""
    element = ET.Element(
        "testcase",
        {
            "classname": _clean(classname(case.file)),
            "name": _clean(case.name),
            "time": _seconds(case.duration_s),
            "file": _clean(case.file),
            "line": str(case.line),
        },
    )
    if case.status in ("skipped", "not run"):
        ET.SubElement(element, "skipped", {"message": _clean(case.message)})
    elif case.status in ("failed", "error", "invalid"):
        tag = "failure" if case.status == "failed" else "error"
        kind = case.hints[0].code if case.hints else case.status
        message = headline(case) + (f" ({cause})" if cause else "")
        child = ET.SubElement(element, tag, {"message": _clean(message), "type": kind})
        child.text = _clean(plain_text(case, cause=cause))
    if case.captured:
        ET.SubElement(element, "system-out").text = _clean(case.captured)
    return element


def classname(path: str) -> str:
    """`cases/nn/mlp.yaml` -> `cases.nn.mlp`: how CI servers group tests into packages."""
    stem = re.sub(r"\.ya?ml$", "", path.replace("\\", "/"))
    return ".".join(part for part in stem.split("/") if part not in ("", "."))


def _seconds(value: float) -> str:
    return f"{value:.3f}"


def _clean(text: str) -> str:
    return _NOT_XML.sub("\ufffd", printable(text))
