"""The report formats (SPEC §5, §7, §11): rich and HTML for people, JSON for tools, JUnit and
GitHub for CI."""

from gradcheck.report.github_report import to_github
from gradcheck.report.html_report import to_html
from gradcheck.report.json_report import to_dict, to_json
from gradcheck.report.junit_report import to_junit
from gradcheck.report.rich_report import (
    headline,
    plain_text,
    render,
    render_case,
    render_problems,
    summary_line,
)

__all__ = [
    "headline",
    "plain_text",
    "render",
    "render_case",
    "render_problems",
    "summary_line",
    "to_dict",
    "to_github",
    "to_html",
    "to_json",
    "to_junit",
]
