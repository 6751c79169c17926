"""The report formats (SPEC §5, §7, §11): rich and HTML for people, JSON for tools, JUnit and
GitHub for CI.

Each format is imported on first use: `gradcheck list` and `gradcheck ops` need only
`report.text`, not the HTML page's SVG and the JUnit writer's XML.
"""

from typing import Any

_FORMATS = {
    "headline": "rich_report",
    "plain_text": "rich_report",
    "render": "rich_report",
    "render_case": "rich_report",
    "render_problems": "rich_report",
    "summary_line": "rich_report",
    "to_dict": "json_report",
    "to_github": "github_report",
    "to_html": "html_report",
    "to_json": "json_report",
    "to_junit": "junit_report",
}

__all__ = list(_FORMATS)


def __getattr__(name: str) -> Any:
    if name in _FORMATS:
        from importlib import import_module

        return getattr(import_module(f"gradcheck.report.{_FORMATS[name]}"), name)
    raise AttributeError(f"module 'gradcheck.report' has no attribute {name!r}")
