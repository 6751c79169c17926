"""Every relative link and #anchor in README.md and docs/*.md resolves: a page moved or a
heading renamed fails here, not in a reader's browser."""

import re
from pathlib import Path

import pytest

from docs_pages import PAGES, ROOT, anchor, anchors, prose_lines


def link_targets(text: str) -> list[str]:
    """The targets of the page's links and images, `[text](target)`, outside code (a link's
    text may wrap over lines)."""
    prose = "\n".join(line for line in prose_lines(text) if line is not None)
    prose = re.sub(r"`[^`\n]*`", "", prose)  # inline code is not a link
    return re.findall(r"\]\(([^)\s]+)\)", prose)


def broken_links(page: Path) -> list[str]:
    broken = []
    for target in link_targets(page.read_text()):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ... : not ours to check
            continue
        path, _, fragment = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif fragment and (linked.suffix != ".md" or fragment not in anchors(linked.read_text())):
            broken.append(f"{target}: no such anchor")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_and_anchor_resolves(page: Path) -> None:
    assert not broken_links(page)


def test_the_checker_sees_a_broken_link_and_a_broken_anchor(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other page\n\n## Config: `[tool.x]` or `x.toml`\n")
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n[ok](other.md#config-toolx-or-xtoml) [ok](#page) [web](https://x.org/#y)\n"
        "[gone](missing.md) [bad](other.md#nope) ![pic\nwrapped](other.md#page)\n"
        "```\n[in code](missing.md)\n# not a heading\n```\n"
    )
    assert broken_links(page) == [
        "missing.md: no such file",
        "other.md#nope: no such anchor",
        "other.md#page: no such anchor",
    ]


def test_anchors_follow_githubs_rules() -> None:
    assert anchor("Configuration: `[tool.gradcheck]` or `gradcheck.toml`") == (
        "configuration-toolgradcheck-or-gradchecktoml"
    )
    assert anchor("Start from `gradcheck init-engine`") == "start-from-gradcheck-init-engine"
    assert anchors("# A\n## Same\n## Same\n```\n# Same\n```\n") == {"a", "same", "same-1"}
