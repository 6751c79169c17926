"""What the expression parser accepts and refuses, as tables (the operators, the
comparisons, the Python constructs it forbids and why), and the error it raises."""

from __future__ import annotations

import ast

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
