"""Reading the HTML report in tests: a strict WHATWG parse, and elements by tag and class."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterator

import html5lib

SVG = "{http://www.w3.org/2000/svg}"


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
