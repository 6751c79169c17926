"""The HTML report in tests: the seed report made by the command line, a strict WHATWG
parse, and elements by tag and class."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import html5lib
from typer.testing import CliRunner

from gradcheck.cli import app

SVG = "{http://www.w3.org/2000/svg}"
ROOT = Path(__file__).resolve().parents[1]
SEED_CASES, SEED_ENGINE = ROOT / "cases" / "seed.yaml", ROOT / "examples" / "seed_engine.py"
ENV = {"COLUMNS": "240", "NO_COLOR": None, "FORCE_COLOR": None, "TTY_COMPATIBLE": None}


def invoke(*args: object):
    result = CliRunner().invoke(app, [str(a) for a in args], env=ENV)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


@dataclass
class Report:
    page: str
    json: dict
    stdout: str
    exit_code: int


def seed_report(folder: Path) -> Report:
    """`gradcheck run cases/seed.yaml -e examples/seed_engine.py --format html -o ...`,
    and the JSON report (with arrays) of the same run."""
    common = ["run", SEED_CASES, "-e", SEED_ENGINE, "--cache-dir", folder / "cache"]
    result = invoke(*common, "--format", "html", "--output", folder / "report.html")
    as_json = json.loads(invoke(*common, "--format", "json", "--verbose").stdout)
    return Report((folder / "report.html").read_text(), as_json, result.stdout, result.exit_code)


def parse(page: str) -> ET.Element:
    """The page's tree; any HTML parse error (not only a fatal one) fails the test."""
    parser = html5lib.HTMLParser(strict=True, namespaceHTMLElements=False)
    return parser.parse(page)


def tag(element: ET.Element) -> str:
    """The tag without the SVG namespace: `svg`, `rect`, `div`."""
    return element.tag.removeprefix(SVG) if isinstance(element.tag, str) else ""


def classes(element: ET.Element) -> set[str]:
    return set((element.get("class") or "").split())


def find(root: ET.Element, name: str, cls: str | None = None) -> list[ET.Element]:
    return [e for e in root.iter() if tag(e) == name and (cls is None or cls in classes(e))]


def one(root: ET.Element, name: str, cls: str | None = None) -> ET.Element:
    (found,) = find(root, name, cls)
    return found


def text_of(element: ET.Element) -> str:
    """All the text inside, whitespace collapsed (style and script left out)."""
    return " ".join("".join(_texts(element)).split())


def _texts(element: ET.Element) -> Iterator[str]:
    if tag(element) in ("style", "script"):
        return
    yield element.text or ""
    for child in element:
        yield from _texts(child)
        yield child.tail or ""


def titles(root: ET.Element) -> list[str]:
    """The `<title>` texts of the SVG elements under root, in order."""
    return [t.text or "" for t in root.iter(f"{SVG}title")]
