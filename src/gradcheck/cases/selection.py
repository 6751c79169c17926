"""`-k` selection: pick cases by name or tag, as pytest's `-k` picks tests.

A word matches a case when it is a substring of the case's name or of one of its tags
(ignoring case); `not`, `and`, `or` and parentheses combine words, `not` binding
tightest and `or` loosest, e.g. ``-k "matmul and not (slow or float16)"``. An expression
that does not parse (``"matmul and"``, ``"(tanh"``, two words with no operator between
them) is a usage error, raised before any case is loaded.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from ..errors import UsageError

Predicate = Callable[[list[str]], bool]  # the case's name and tags, lowercased
OPERATORS = ("and", "or", "not")
_TOKEN = re.compile(r"\(|\)|[^\s()]+")
MAX_DEPTH = 100  # parentheses and `not`s nested: the parser recurses once per level


def matches(expression: str, name: str, tags: Iterable[str] = ()) -> bool:
    return selector(expression)(name, tags)


def selector(expression: str) -> Callable[[str, Iterable[str]], bool]:
    """`expression` compiled: a test of a case's name and tags; `UsageError` when malformed."""
    predicate = _Parser(expression).parse()
    return lambda name, tags=(): predicate([name.lower(), *(t.lower() for t in tags)])


class _Parser:
    """Recursive descent over `or` > `and` > `not` > a word or a parenthesised expression."""

    def __init__(self, expression: str) -> None:
        self.expression = expression
        self.tokens = _TOKEN.findall(expression)
        self.at = 0
        self.depth = 0

    def parse(self) -> Predicate:
        if not self.tokens:
            self._fail("it is empty; give a name or tag, e.g. -k matmul")
        predicate = self._or()
        if self.at < len(self.tokens):
            self._fail(f"expected and, or or the end after {self.tokens[self.at - 1]!r}, "
                       f"got {self.tokens[self.at]!r}")  # fmt: skip
        return predicate

    def _or(self) -> Predicate:
        terms = [self._and()]
        while self._take("or"):
            terms.append(self._and())
        return terms[0] if len(terms) == 1 else lambda words: any(t(words) for t in terms)

    def _and(self) -> Predicate:
        terms = [self._not()]
        while self._take("and"):
            terms.append(self._not())
        return terms[0] if len(terms) == 1 else lambda words: all(t(words) for t in terms)

    def _not(self) -> Predicate:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            self._fail(f"it nests parentheses or `not` over {MAX_DEPTH} deep")
        try:
            if self._take("not"):
                inner = self._not()
                return lambda words: not inner(words)
            return self._word()
        finally:
            self.depth -= 1

    def _word(self) -> Predicate:
        before = self.tokens[self.at - 1] if self.at else None
        if self.at == len(self.tokens):
            self._fail(f"expected a name or tag after {before!r}" if before else "it is empty")
        token = self.tokens[self.at]
        self.at += 1
        if token == "(":
            inner = self._or()
            if not self._take(")"):
                self._fail("a '(' is not closed")
            return inner
        if token == ")" or token in OPERATORS:
            where = f"after {before!r}" if before else "at the start"
            self._fail(f"expected a name or tag {where}, got {token!r}")
        needle = token.lower()
        return lambda words: any(needle in word for word in words)

    def _take(self, token: str) -> bool:
        if self.at < len(self.tokens) and self.tokens[self.at] == token:
            self.at += 1
            return True
        return False

    def _fail(self, why: str) -> None:
        shown = self.expression if len(self.expression) <= 80 else self.expression[:80] + "..."
        raise UsageError(f"-k {shown!r} is not a selection expression: {why}")
