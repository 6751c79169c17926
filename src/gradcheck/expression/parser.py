"""Expression parser: Python syntax read with `ast` against a whitelist, never evaluated.

An expression is one Python expression, or several ``name = expression`` lines that
end with the output expression. Calls name ops of the registry; the operators
``@ + - * / **`` and unary ``-`` map to ``matmul add sub mul div pow neg``; numeric
literals become constants; ``x[0, :, 1:3]`` is ``getitem``. An op with several outputs
(split) is indexed, at once or through a binding (``parts = split(x, 2)``, then
``parts[1]``): each output used is a node of its own (`graph.Node`). Every node's shape is
inferred here, so a shape error is found before anything runs, and it names the node.
"""

from __future__ import annotations

import ast
import difflib
import itertools
from collections.abc import Mapping
from typing import Any

from ..ops import Op, Shape, ShapeError, all_ops, get_op, has_op, operator_ops
from .graph import Expression, Node
from .syntax import BINOPS as _BINOPS
from .syntax import COMPARISONS as _COMPARISONS
from .syntax import FORBIDDEN as _FORBIDDEN
from .syntax import UNSUPPORTED_BINOPS as _UNSUPPORTED_BINOPS
from .syntax import ExpressionError, attr_literal, float_literal, is_negative_number, is_number

MAX_DEPTH = 200


def parse(
    source: str,
    input_shapes: Mapping[str, Shape],
    integer_inputs: Mapping[str, str] | None = None,
    dtype: str | None = None,
) -> Expression:
    """Parse `source` into an `Expression` whose inputs have the given shapes;
    `integer_inputs` names the integer ones (indices, labels) with their dtypes; `dtype`,
    the case's, fills in an op's ``dtype`` attribute left None (one_hot's output)."""
    return _Parser(source, input_shapes, integer_inputs or {}, dtype).parse()


class _Parser:
    def __init__(
        self,
        source: str,
        input_shapes: Mapping[str, Shape],
        integer_inputs: Mapping[str, str],
        dtype: str | None,
    ) -> None:
        self.source = source.strip()
        self.dtype = dtype
        self.nodes: list[Node] = []
        self.inputs: dict[str, Node] = {}
        self.input_shapes = {k: tuple(v) for k, v in input_shapes.items()}
        self.integer_inputs = dict(integer_inputs)
        self.bindings: dict[str, Node] = {}
        self.parts: dict[tuple[Node, int], Node] = {}  # each output of an op with several
        self.operators = operator_ops()
        # Each line as UTF-8 (ast's column offsets count bytes), and where it starts, so
        # that a node's text is one slice: `ast.get_source_segment` splits the whole source
        # again for every node, which made 20,000 bindings take minutes.
        self.lines = [line.encode() for line in self.source.splitlines(keepends=True)]
        self.starts = [0, *itertools.accumulate(len(line) for line in self.lines)]
        self.raw = b"".join(self.lines)

    def parse(self) -> Expression:
        try:
            tree = ast.parse(self.source, mode="exec")
        except SyntaxError as e:
            raise ExpressionError(f"syntax error: {e.msg}", e.lineno or 1) from None
        except ValueError as e:  # a NUL byte, on some Python versions
            raise ExpressionError(f"syntax error: {e}") from None
        except (RecursionError, MemoryError):
            message = f"expression is nested more than {MAX_DEPTH} levels deep"
            raise ExpressionError(message) from None
        if not tree.body:
            raise ExpressionError("the expression is empty")
        *assignments, last = tree.body
        for stmt in assignments:
            self._binding(stmt)
        if not isinstance(last, ast.Expr):
            raise ExpressionError(
                "the last line must be the output expression, not a statement", last.lineno
            )
        output = self._node(last.value, 0)
        if output.is_multi:
            raise ExpressionError(f"the output {output.unindexed()}", last.lineno)
        if output.is_literal:
            raise ExpressionError("the output is a constant; it depends on no input", last.lineno)
        return Expression(self.source, self.nodes, output, self.inputs, self.bindings)

    def _binding(self, stmt: ast.stmt) -> None:
        if not (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
        ):
            raise ExpressionError(
                "only `name = expression` lines may come before the output expression",
                stmt.lineno,
            )
        name = stmt.targets[0].id
        if name in self.input_shapes or name in self.bindings:
            raise ExpressionError(f"{name!r} is already defined; pick a new name", stmt.lineno)
        if has_op(name):
            raise ExpressionError(f"{name!r} is an op's name; pick another", stmt.lineno)
        node = self._node(stmt.value, 0)
        if node.name is None:
            node.name = name
        self.bindings[name] = node

    # -- nodes -------------------------------------------------------------------------
    def _text(self, node: ast.AST) -> str:
        """The node's source text, blanks runs made single spaces."""
        try:
            start = self.starts[node.lineno - 1] + node.col_offset
            end = self.starts[node.end_lineno - 1] + node.end_col_offset  # type: ignore[operator]
            segment = self.raw[start:end].decode()
        except (AttributeError, IndexError, TypeError, UnicodeDecodeError):
            segment = ""
        return " ".join((segment or ast.unparse(node)).split())

    def _add(self, node: ast.AST, **fields: Any) -> Node:
        made = Node(index=len(self.nodes), text=self._text(node), line=node.lineno, **fields)
        self.nodes.append(made)
        return made

    def _node(self, node: ast.expr, depth: int) -> Node:
        if depth > MAX_DEPTH:
            raise ExpressionError(
                f"expression is nested more than {MAX_DEPTH} levels deep", node.lineno
            )
        if isinstance(node, ast.Name):
            return self._name(node)
        if isinstance(node, ast.Constant) or is_negative_number(node):
            return self._add(node, shape=(), literal=float_literal(node))
        if isinstance(node, ast.BinOp):
            symbol = _BINOPS.get(type(node.op))
            if symbol is None:
                raise ExpressionError(
                    f"{self._text(node)}: operator {_UNSUPPORTED_BINOPS[type(node.op)]} "
                    "is not supported (use @ + - * / ** or an op)",
                    node.lineno,
                )
            args = [self._node(node.left, depth + 1), self._node(node.right, depth + 1)]
            return self._apply(node, self.operators[symbol], args, {})
        if isinstance(node, ast.Compare):
            symbol = _COMPARISONS.get(type(node.ops[0]))
            if len(node.ops) > 1 or symbol is None:
                raise ExpressionError(
                    f"{self._text(node)}: one comparison > >= < <= == or != at a time "
                    "(no chains, no `is`/`in`)",
                    node.lineno,
                )
            args = [self._node(node.left, depth + 1), self._node(node.comparators[0], depth + 1)]
            return self._apply(node, self.operators[symbol], args, {})
        if isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.UAdd):
                return self._node(node.operand, depth + 1)
            if isinstance(node.op, ast.USub):
                return self._apply(
                    node, self.operators["u-"], [self._node(node.operand, depth + 1)], {}
                )
            raise ExpressionError(
                f"{self._text(node)}: only unary - and + are allowed", node.lineno
            )
        if isinstance(node, ast.Call):
            return self._call(node, depth)
        if isinstance(node, ast.Subscript):
            base = self._node(node.value, depth + 1)
            if base.is_multi:
                return self._part(node, base)
            taken = self._array_index(node.slice)
            if taken is not None:  # x[:, j]: take(x, j, axis=1) (SPEC §3.1)
                axis, indices = taken
                return self._apply(node, get_op("take"), [base, indices], {"axis": axis})
            return self._apply(node, get_op("getitem"), [base], {"index": self._index(node.slice)})
        if isinstance(node, (ast.List, ast.Tuple)):
            raise ExpressionError(
                f"{self._text(node)}: a list is only allowed as the first argument of concat "
                "or stack, or as an attribute",
                node.lineno,
            )
        reason = _FORBIDDEN.get(type(node), f"{type(node).__name__} is not allowed")
        raise ExpressionError(f"{self._text(node)}: {reason}", node.lineno)

    def _name(self, node: ast.Name) -> Node:
        name = node.id
        if name in self.bindings:
            return self.bindings[name]
        if name in self.inputs:
            return self.inputs[name]
        if name in self.input_shapes:
            made = self._add(
                node,
                shape=self.input_shapes[name],
                name=name,
                integer=self.integer_inputs.get(name),
            )
            self.inputs[name] = made
            return made
        if has_op(name):
            raise ExpressionError(f"{name} is an op; call it, as in {name}(x)", node.lineno)
        names = [*self.input_shapes, *self.bindings]
        close = difflib.get_close_matches(name, names, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ExpressionError(
            f"undefined name {name!r} ({hint}inputs and bindings: {', '.join(names) or 'none'})",
            node.lineno,
        )

    def _call(self, node: ast.Call, depth: int) -> Node:
        if not isinstance(node.func, ast.Name):
            reason = _FORBIDDEN.get(type(node.func), "call an op by its name")
            raise ExpressionError(f"{self._text(node)}: {reason}", node.lineno)
        if not has_op(node.func.id):
            names = [op.name for op in all_ops()]
            close = difflib.get_close_matches(node.func.id, names, n=3)
            close.sort(key=lambda c: sorted(c) != sorted(node.func.id))  # tahn: tanh, not tan
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ExpressionError(
                f"{self._text(node)}: unknown op {node.func.id!r} ({hint}`gradcheck ops` "
                "lists them)",
                node.lineno,
            )
        op = get_op(node.func.id)
        if op.leading is not None:
            return self._leading_call(node, op, depth)
        n_params = len(op.params)
        positional, extra = node.args[:n_params], node.args[n_params:]
        if len(positional) < n_params:
            raise ExpressionError(
                f"{self._text(node)}: {op.name} takes {n_params} argument(s): {op.signature}",
                node.lineno,
            )
        if len(extra) > len(op.attrs):
            raise ExpressionError(
                f"{self._text(node)}: too many arguments for {op.signature}", node.lineno
            )
        attrs = {
            name: attr_literal(value, self._text(value))
            for name, value in zip(op.attrs, extra, strict=False)
        }
        for kw in node.keywords:
            if kw.arg is None:
                raise ExpressionError(f"{self._text(node)}: **kwargs are not allowed", node.lineno)
            if kw.arg in attrs:
                raise ExpressionError(f"{self._text(node)}: {kw.arg} given twice", node.lineno)
            attrs[kw.arg] = attr_literal(kw.value, self._text(kw.value))
        if op.variadic:
            values = positional[0]
            if not isinstance(values, (ast.List, ast.Tuple)) or not values.elts:
                raise ExpressionError(
                    f"{self._text(node)}: {op.name} takes a non-empty list [a, b, ...] first",
                    node.lineno,
                )
            args = [self._node(v, depth + 1) for v in values.elts]
        else:
            args = [self._node(a, depth + 1) for a in positional]
        return self._apply(node, op, args, attrs)

    def _leading_call(self, node: ast.Call, op: Op, depth: int) -> Node:
        """einsum("ij,jk->ik", a, b): the leading attribute, a string, then the operands."""
        first = node.args[0] if node.args else None
        if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
            raise ExpressionError(
                f"{self._text(node)}: {op.name} takes its {op.leading} first, a string: "
                f'{op.name}("ij,jk->ik", a, b)',
                node.lineno,
            )
        if len(node.args) < 2:
            raise ExpressionError(
                f"{self._text(node)}: {op.name} needs at least one operand after its {op.leading}",
                node.lineno,
            )
        attrs: dict[str, Any] = {op.leading: first.value}
        for kw in node.keywords:
            if kw.arg is None or kw.arg in attrs:
                what = "**kwargs are not allowed" if kw.arg is None else f"{kw.arg} given twice"
                raise ExpressionError(f"{self._text(node)}: {what}", node.lineno)
            attrs[kw.arg] = attr_literal(kw.value, self._text(kw.value))
        args = [self._node(a, depth + 1) for a in node.args[1:]]
        return self._apply(node, op, args, attrs)

    def _apply(self, node: ast.AST, op: Op, args: list[Node], attrs: dict[str, Any]) -> Node:
        text = self._text(node)
        for arg in args:
            if arg.is_multi:  # only its parts are values
                raise ExpressionError(f"{text}: {arg.unindexed()}", node.lineno)
        _check_integer_args(text, op, args, node.lineno)
        try:
            attrs = op.resolve_attrs(attrs)
            if "dtype" in op.attrs and attrs["dtype"] is None and self.dtype:
                attrs["dtype"] = self.dtype
            shapes = [a.shape for a in args]
            shape = op.shape(shapes, **attrs) if op.variadic else op.shape(*shapes, **attrs)
            if op.outputs is not None:  # several outputs: one shape each
                shapes = [tuple(s) for s in shape]
                if len(shapes) != op.outputs(*(a.shape for a in args), **attrs):
                    raise ShapeError(f"{op.name}'s shape rule and output count differ")
                made = self._add(node, shape=(), op=op, args=tuple(args), attrs=attrs)
                made.outputs = tuple(shapes)
                return made
        except ShapeError as e:
            raise ExpressionError(f"{text}: {e}", node.lineno) from None
        except Exception as e:  # attributes of a kind no shape rule expected (a float axis)
            message = f"{text}: {op.signature} cannot take these attributes ({type(e).__name__})"
            raise ExpressionError(message, node.lineno) from None
        return self._add(node, shape=tuple(shape), op=op, args=tuple(args), attrs=attrs)

    def _part(self, node: ast.Subscript, base: Node) -> Node:
        """Output `k` of an op with several (`base`), `split(x, 2)[1]`: one node per output,
        however often it is indexed."""
        assert base.outputs is not None
        count, text = len(base.outputs), self._text(node)
        index = node.slice
        k = attr_literal(index, text) if is_number(index) else None
        if isinstance(k, bool) or not isinstance(k, int):
            raise ExpressionError(
                f"{text}: {base.text} returns {count} values; index one with an integer "
                f"({base.text}[0])",
                node.lineno,
            )
        if not -count <= k < count:
            raise ExpressionError(
                f"{text}: index {k} is out of range: {base.text} returns {count} value"
                f"{'s' if count != 1 else ''} (indices 0 to {count - 1})",
                node.lineno,
            )
        k %= count
        made = self.parts.get((base, k))
        if made is None:
            made = self._add(node, shape=base.outputs[k], args=(base,), part=k)
            self.parts[base, k] = made
        return made

    def _array_index(self, node: ast.expr) -> tuple[int, Node] | None:
        """An integer-array subscript as take's (axis, indices): one integer input, after
        only `:`s; None for basic indexing."""
        items = node.elts if isinstance(node, ast.Tuple) else [node]
        arrays = [i for i, item in enumerate(items) if isinstance(item, ast.Name)]
        if not arrays:
            return None
        at = arrays[0]
        full = all(
            isinstance(item, ast.Slice) and item.lower is item.upper is item.step is None
            for item in items[:at] + items[at + 1 :]
        )
        if len(arrays) > 1 or not full:
            raise ExpressionError(
                f"{self._text(node)}: an integer-array index is one index array after only "
                "':'s (x[i], x[:, j]: take(x, j, axis=1)); use take for anything else",
                node.lineno,
            )
        return at, self._name(items[at])  # type: ignore[arg-type]

    def _index(self, node: ast.expr) -> tuple:
        items = node.elts if isinstance(node, ast.Tuple) else [node]
        return tuple(self._index_item(item) for item in items)

    def _index_item(self, node: ast.expr) -> Any:
        if isinstance(node, ast.Slice):
            parts = (node.lower, node.upper, node.step)
            return slice(*(None if p is None else self._index_int(p) for p in parts))
        if isinstance(node, ast.Constant) and (node.value is None or node.value is Ellipsis):
            return node.value
        return self._index_int(node)

    def _index_int(self, node: ast.expr) -> int:
        value = attr_literal(node, self._text(node)) if is_number(node) else None
        if isinstance(value, bool) or not isinstance(value, int):
            raise ExpressionError(
                f"{self._text(node)}: only basic indexing is supported "
                "(integers, slices, None and ...)",
                node.lineno,
            )
        return value


def _check_integer_args(text: str, op: Op, args: list[Node], line: int) -> None:
    """Integer inputs go to an op's integer parameters (indices, labels) and nowhere else:
    no op differentiates through them, and no float reaches a parameter that indexes."""
    params = [op.params[0]] * len(args) if op.variadic else op.params
    for param, arg in zip(params, args, strict=False):
        if arg.integer and param not in op.integer:
            takers = ", ".join(f"{o.name}'s {p}" for o in all_ops() for p in o.integer)
            raise ExpressionError(
                f"{text}: {arg.text} is an integer input ({arg.integer}); only an integer "
                f"parameter takes one ({takers or 'none'})",
                line,
            )
        if param in op.integer and not arg.integer:
            raise ExpressionError(
                f"{text}: {param} must be an integer input ({{values: [...], dtype: int64}}, "
                f"or a spec with init: integers and dtype: int64), not the float {arg.text}",
                line,
            )
