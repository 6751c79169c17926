"""Expressions: parsed from text into a graph of nodes whose shapes are known."""

from .graph import Expression, Node
from .parser import ExpressionError, parse

__all__ = ["Expression", "ExpressionError", "Node", "parse"]
