"""The expressions formula recovery searches (`mechanisms.formula`): grow them bottom-up
by size, keep one per distinct value vector, print them in the rule texts' NumPy spelling,
and find the one edit (a square, a sign, a factor, x for y) that makes one right.

An expression is a tuple: ("name", n) | ("const", c) | ("neg"|"sq"|"inv", e) |
("fn", f, e) | ("op", symbol, left, right). It is evaluated on flat columns, one per name,
each probe's values end to end (`env`, with the engine's factor as "target").
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator

import numpy as np

Expr = tuple
CONSTANTS = (1.0, 2.0, 0.5, 3.0)
FACTORS = (1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0, -3.0, 1 / 3, -1 / 3)  # f may be c * found
FUNCTIONS = {"exp": np.exp, "log": np.log, "sqrt": np.sqrt, "tanh": np.tanh}
FUNCTIONS |= {"sin": np.sin, "cos": np.cos}
MAX_SIZE = 5  # nodes of f: `x * np.exp(x)` is 4, `1 - y` 3
MAX_CANDIDATES = 40_000
FUNCTION_ARG_SIZE = 2  # np.exp(-x) yes, np.exp(x * y - 1) no: real rules nest shallowly
OPS = {"+": (5, np.add), "-": (5, np.subtract), "*": (6, np.multiply), "/": (6, np.divide)}
OPS["**"] = (8, np.power)


def search(search, held, leaves, functions, rtol) -> Expr | None:
    """The smallest expression `f` (times a factor from FACTORS) whose values are the
    engine's factor on the search probes and on the held-out ones; among those of one
    size, one without a factor first, then a positive factor, then the shortest text.
    Bounded by a count of candidates, not a clock, so that the answer never depends on
    how busy the machine is."""
    seen: set[bytes] = set()
    levels: dict[int, list[tuple[Expr, np.ndarray]]] = {}
    count = 0
    for size in range(1, MAX_SIZE + 1):
        levels[size], found = [], []
        for expr, value in _grow(size, levels, leaves, functions, search):
            count += 1
            if count > MAX_CANDIDATES:
                break
            if not np.isfinite(value).all():
                continue
            key = np.round(value, 9).tobytes()
            if key in seen:
                continue
            seen.add(key)
            if expr[0] != "const" and size > 1 and np.ptp(value) == 0:
                continue  # a constant folded from constants: FACTORS stand for those
            levels[size].append((expr, value))
            factor = _factor(search["target"], value, rtol)
            if factor is None:
                continue
            scaled = expr if factor == 1 else ("op", "*", ("const", factor), expr)
            with np.errstate(all="ignore"):
                if close(held["target"], _evaluate(scaled, held), rtol):
                    found.append((factor != 1, factor < 0, len(text(scaled)), len(found), scaled))
        if found:
            return _tidy(min(found)[-1])
        if count > MAX_CANDIDATES:
            return None
    return None


def _grow(size: int, levels, leaves, functions, env) -> Iterator[tuple[Expr, np.ndarray]]:
    """The expressions of `size` nodes over those of fewer, each with its values, computed
    from its parts' (one NumPy call each)."""
    with np.errstate(all="ignore"):
        if size == 1:
            yield from ((leaf, _evaluate(leaf, env)) for leaf in leaves)
            return
        for expr, v in levels[size - 1]:
            yield ("neg", expr), -v
            yield ("sq", expr), v * v
            yield ("inv", expr), 1 / v
            if size - 1 <= FUNCTION_ARG_SIZE:
                for f in functions:
                    yield ("fn", f, expr), FUNCTIONS[f](v)
        for left_size in range(1, size - 1):
            lefts, rights = levels[left_size], levels[size - 1 - left_size]
            same = left_size == size - 1 - left_size
            for (i, (left, u)), (j, (right, v)) in itertools.product(
                enumerate(lefts), enumerate(rights)
            ):
                for symbol, (_, apply) in OPS.items():
                    if symbol in "+*" and same and i > j:
                        continue  # commutative: each pair once
                    if symbol == "**" and right[0] != "const":
                        continue  # powers by constants; sq and inv cover the rest
                    if _awkward(symbol, right):
                        continue
                    yield ("op", symbol, left, right), apply(u, v)


def _awkward(symbol: str, right: Expr) -> bool:
    """`a / (b / c)`, `a * (b / c)`, `a - -b`, `a + -b`: the same values as a plainer form
    (`a * c / b`, ...) that the search meets too, and keeps."""
    if symbol in "*/" and right[0] == "op" and right[1] == "/":
        return True
    return symbol in "+-" and right[0] == "neg"


def _evaluate(expr: Expr, env: dict[str, np.ndarray]) -> np.ndarray:
    kind = expr[0]
    if kind == "name":
        return np.broadcast_to(env[expr[1]], env["target"].shape)
    if kind == "const":
        return np.full(env["target"].shape, expr[1])
    if kind == "neg":
        return -_evaluate(expr[1], env)
    if kind == "sq":
        return _evaluate(expr[1], env) ** 2
    if kind == "inv":
        return 1 / _evaluate(expr[1], env)
    if kind == "fn":
        return FUNCTIONS[expr[1]](_evaluate(expr[2], env))
    return OPS[expr[1]][1](_evaluate(expr[2], env), _evaluate(expr[3], env))


def _factor(target: np.ndarray, value: np.ndarray, rtol: float) -> float | None:
    k = int(np.argmax(np.abs(value)))
    if value[k] == 0:
        return None
    ratio = target[k] / value[k]
    for c in FACTORS:
        if math.isclose(ratio, c, rel_tol=rtol) and close(target, c * value, rtol):
            return c
    return None


def close(want: np.ndarray, got: np.ndarray, rtol: float) -> bool:
    scale = float(np.max(np.abs(want))) if want.size else 0.0
    return bool(np.all(np.abs(got - want) <= rtol * (np.abs(want) + scale)))


def _tidy(expr: Expr) -> Expr:
    """-1 * f as -f."""
    if expr[0] == "op" and expr[1] == "*" and expr[2] == ("const", -1.0):
        return ("neg", expr[3])
    return expr


# -- printing ------------------------------------------------------------------------------
def text(expr: Expr) -> str:
    return _text(expr)[0]


def _text(expr: Expr) -> tuple[str, int]:
    """The expression in NumPy spelling, and its precedence (10: an atom)."""
    kind = expr[0]
    if kind == "name":
        return expr[1], 10
    if kind == "const":
        return f"{expr[1]:g}", 10
    if kind == "neg":
        return "-" + _wrap(expr[1], 7), 7
    if kind == "sq":
        return _wrap(expr[1], 9) + "**2", 8
    if kind == "inv":
        return "1 / " + _wrap(expr[1], 7), 6
    if kind == "fn":
        return f"np.{expr[1]}({text(expr[2])})", 10
    symbol, (prec, _) = expr[1], OPS[expr[1]]
    if symbol == "**":
        return f"{_wrap(expr[2], 9)}**{_wrap(expr[3], 8)}", 8
    right_prec = prec + 1 if symbol in "-/" else prec
    return f"{_wrap(expr[2], prec)} {symbol} {_wrap(expr[3], right_prec)}", prec


def _wrap(expr: Expr, prec: int) -> str:
    s, p = _text(expr)
    return s if p >= prec else f"({s})"


def rule_text(base: str, f: Expr) -> str:
    """`base` (the direction: g, t, g spread) times `f`, as a rule text reads."""
    if f == ("const", 1.0):
        return base
    if f[0] == "neg":
        return "-" + rule_text(base, f[1])
    if f[0] == "inv":
        return f"{base} / {_wrap(f[1], 7)}"
    if f[0] == "op" and f[1] == "*" and f[2][0] == "const":
        return f"{text(f[2])} * {rule_text(base, f[3])}"
    return f"{base} * {_wrap(f, 6)}"


# -- the fix: the one edit that makes the recovered rule right ---------------------------
EDITS = (
    ("square `{s}`", lambda s: ("sq", s)),
    ("negate `{s}`", lambda s: ("neg", s)),
    ("multiply `{s}` by 2", lambda s: ("op", "*", ("const", 2.0), s)),
    ("halve `{s}`", lambda s: ("op", "*", ("const", 0.5), s)),
    ("invert `{s}`", lambda s: ("inv", s)),
)
SWAPS = {"x": "y", "y": "x", "a": "b", "b": "a"}


def fix(expr: Expr, search, held, rtol: float) -> str | None:
    """What one edit of `expr` makes it the right factor at every probe, if one does."""
    edits = [*_edits(expr), (f"drop the factor `{text(expr)}`", ("const", 1.0))]
    for words, edited in edits:
        if not _names(edited) <= set(search):
            continue  # a swap to a name the op does not have (pow's y for x)
        with np.errstate(all="ignore"):
            if all(close(part["right"], _evaluate(edited, part), rtol) for part in (search, held)):
                return words
    return None


def _names(expr: Expr) -> set[str]:
    if expr[0] == "name":
        return {expr[1]}
    return set().union(*(_names(part) for part in expr if isinstance(part, tuple)))


def _edits(expr: Expr) -> Iterator[tuple[str, Expr]]:
    """Each single edit of `expr`, with what it says, subtrees before their parts."""
    if expr[0] == "sq":
        yield f"do not square `{text(expr[1])}`", expr[1]
    if expr[0] == "neg":
        yield "drop the minus sign", expr[1]
    if expr[0] == "op" and expr[1] in "*/":
        yield f"drop the factor `{text(expr[3])}`", expr[2]
    if expr[0] == "op" and expr[1] == "*":
        yield f"drop the factor `{text(expr[2])}`", expr[3]
    if expr[0] == "name" and expr[1] in SWAPS:
        yield f"use `{SWAPS[expr[1]]}` where it uses `{expr[1]}`", ("name", SWAPS[expr[1]])
    for words, edit in EDITS:
        yield words.format(s=text(expr)), edit(expr)
    for i, part in enumerate(expr):
        if isinstance(part, tuple):
            for words, edited in _edits(part):
                yield words, (*expr[:i], edited, *expr[i + 1 :])
