"""What the expression parser accepts and refuses, as tables (the operators, the
comparisons, the Python constructs it forbids and why), the literals it reads, and the
error it raises."""

from __future__ import annotations

import ast
from typing import Any

BINOPS = {ast.MatMult: "@", ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Pow: "**"}
COMPARISONS = {
    ast.Gt: ">", ast.GtE: ">=", ast.Lt: "<", ast.LtE: "<=", ast.Eq: "==", ast.NotEq: "!=",
}  # fmt: skip
UNSUPPORTED_BINOPS = {
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.LShift: "<<",
    ast.RShift: ">>",
    ast.BitOr: "|",
    ast.BitXor: "^",
    ast.BitAnd: "&",
}
FORBIDDEN = {
    ast.Attribute: "attribute access is not allowed; call an op by its name",
    ast.Lambda: "lambda is not allowed",
    ast.BoolOp: "and/or are not allowed",
    ast.IfExp: "conditional expressions are not allowed",
    ast.Dict: "dicts are not allowed",
    ast.Set: "sets are not allowed",
    ast.ListComp: "comprehensions are not allowed",
    ast.GeneratorExp: "comprehensions are not allowed",
    ast.Starred: "*args are not allowed",
    ast.JoinedStr: "strings are not allowed",
}


class ExpressionError(ValueError):
    """A problem with an expression, at `line` (1-based, within the expression)."""

    def __init__(self, message: str, line: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


def is_negative_number(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.USub)
        and isinstance(node.operand, ast.Constant)
    )


def is_number(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) or is_negative_number(node)


def number_value(node: ast.expr) -> int | float:
    sign = -1 if is_negative_number(node) else 1
    value = node.operand.value if sign < 0 else node.value  # type: ignore[attr-defined]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ExpressionError(
            f"{ast.unparse(node)}: only numeric literals are allowed", node.lineno
        )
    return sign * value


def float_literal(node: ast.expr) -> float:
    try:
        return float(number_value(node))
    except OverflowError:
        raise ExpressionError(
            "a literal is too large for a float; write it as 1e308 at most", node.lineno
        ) from None


def attr_literal(node: ast.expr, text: str) -> Any:
    """An attribute's value: a number, a string ('SAME'), True/False, None or a list of
    those."""
    if isinstance(node, ast.Constant) and (
        node.value is None or isinstance(node.value, (bool, str))
    ):
        return node.value
    if is_number(node):
        return number_value(node)
    if isinstance(node, (ast.List, ast.Tuple)):
        return [attr_literal(e, text) for e in node.elts]
    raise ExpressionError(
        f"{text}: attributes must be literal numbers, strings, lists, True/False or None",
        node.lineno,
    )
