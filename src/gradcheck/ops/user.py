"""User-defined ops (SPEC §9): the builtin ops' declaration, public, loaded from files.

An ops file is plain Python, trusted like a conftest.py, that declares ops::

    import numpy as np
    import gradcheck

    @gradcheck.op(
        shape=gradcheck.same_shape,
        vjps=[lambda g, ans, x: g * -np.expm1(-ans)],   # smooth_relu' = sigmoid = 1 - e**-ans
        rules=["g * (1 - np.exp(-y))"],
        jvps=[lambda t, ans, x: t * -np.expm1(-ans)],
        jvp_rules=["t * (1 - np.exp(-y))"],
        tf=lambda tf, x: tf.math.softplus(x),
    )
    def smooth_relu(x):
        \"\"\"log(1 + e ** x)\"\"\"
        return np.logaddexp(0.0, x)

The decorated function is the NumPy forward: its positional parameters are the op's
tensor parameters, its keyword-only parameters (with defaults) the attributes, its
docstring the op's `doc`. `shape` is required; `vjps` (one per parameter, in the
builtin engine's ``vjp(g, ans, *args, **attrs)`` form), `jvps` (forward mode, ``jvp(t,
ans, *args, **attrs)``) and `tf` (``tf(tf, *args, **attrs)``) are optional: without
VJPs the builtin engine skips the op (without JVPs, in forward mode), without a
TensorFlow builder only ``--reference numeric`` judges it. `rules` and `jvp_rules` are
the VJPs and JVPs as text, one per parameter (`tf_rules`, `tf_jvp_rules` in TensorFlow
spelling, the NumPy text when left out; `torch_rules`, `jax_rules`, `torch_jvp_rules`,
`jax_jvp_rules` in PyTorch and JAX spelling, for an op checked through the stock torch
or jax adapter, none when left out): the diagnosis's fixes state them, as they state the
builtin ops' (`ops.registry` names the variables a text may use). `domain`
maps a parameter to the `gradcheck.Interval` that ``gradcheck fuzz`` keeps its values in
(as the builtin ops declare: ``{"x": gradcheck.Interval(low=0.1)}``).
`register_op(Op(...))` is the long form, field for field what the builtin ops declare.

`load_ops_files` imports such files, once per process whatever it is asked (so a
config file, the command line and a worker process's initializer may all call it).
Every declaration is checked when it is made; a problem is an `OpDeclarationError`
(a usage error, exit 2) saying ``file:line: op 'name': what to change``.
"""

from __future__ import annotations

import contextlib
import inspect
import keyword
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import UsageError
from . import registry
from .registry import JVP, VJP, Interval, Op, Shape

# Names the engine protocol, the builtin engine or the TensorFlow engine use for something
# else than an op: an op method of that name would be shadowed by them, or shadow them.
RESERVED = frozenset(
    {"leaf", "constant", "value", "grad", "vjp", "jvp", "name", "conventions", "scalar_only"}
    | {"higher_order", "functional_jvp", "driver"}
    | {"apply", "backward", "vjp_rule", "reduce_to_shape", "accumulate", "topological_order"}
    | {"cotangents"}  # the builtin engine's, for an op with several outputs
    | {"tangent", "jvp_rule", "broadcast_tangent"}
    | {"tf", "tapes", "recording", "record"}
)

_LOADED: dict[Path, list[Op]] = {}  # resolved path -> the ops it declared


class OpDeclarationError(UsageError):
    """A user op's declaration cannot be used; the message names the op and its line."""


def same_shape(x: Shape, **attrs: Any) -> Shape:
    """The shape rule of an elementwise unary op: the output has the input's shape."""
    return x


def op(
    *,
    shape: Callable[..., Shape] | None = None,
    vjps: Sequence[VJP] = (),
    tf: Callable[..., Any] | None = None,
    tf_name: str | None = None,
    name: str | None = None,
    doc: str | None = None,
    variadic: bool = False,
    domain: Mapping[str, Interval] | None = None,
    rules: Sequence[str] = (),
    tf_rules: Sequence[str] = (),
    jvps: Sequence[JVP] = (),
    jvp_rules: Sequence[str] = (),
    tf_jvp_rules: Sequence[str] = (),
    torch_rules: Sequence[str] = (),
    jax_rules: Sequence[str] = (),
    torch_jvp_rules: Sequence[str] = (),
    jax_jvp_rules: Sequence[str] = (),
) -> Callable[[Callable[..., Any]], Op]:
    """Declare the decorated NumPy forward as an op; the decorator returns the `Op`."""
    origin = _origin(sys._getframe(1))

    def declare(forward: Callable[..., Any]) -> Op:
        op_name = name or getattr(forward, "__name__", "")
        params, attrs = _parameters(forward, op_name, origin)
        declared = _build(
            origin,
            name=op_name,
            params=params,
            attrs=attrs,
            shape=shape,
            forward=forward,
            vjps=tuple(vjps),
            tf=tf,
            tf_name=tf_name,
            doc=doc if doc is not None else inspect.getdoc(forward) or "",
            variadic=variadic,
            domain=dict(domain or {}),
            rules=rules,
            tf_rules=tf_rules,
            jvps=tuple(jvps),
            jvp_rules=jvp_rules,
            tf_jvp_rules=tf_jvp_rules,
            torch_rules=torch_rules,
            jax_rules=jax_rules,
            torch_jvp_rules=torch_jvp_rules,
            jax_jvp_rules=jax_jvp_rules,
        )
        return _register(declared)

    return declare


def register_op(declaration: Op) -> Op:
    """Check and register a user op given as a whole `Op(...)`; returns it."""
    origin = _origin(sys._getframe(1))
    if not isinstance(declaration, Op):
        raise OpDeclarationError(f"{origin}: register_op takes a gradcheck.Op, not {declaration!r}")
    fields = {f: getattr(declaration, f) for f in declaration.__dataclass_fields__}
    if fields.pop("operator") is not None or fields.pop("kink") is not None:
        raise OpDeclarationError(
            f"{origin}: op {declaration.name!r}: operator and kink are for builtin ops only"
        )
    fields.pop("origin")
    return _register(_build(origin, **fields))


def load_ops_files(paths: Iterable[str | os.PathLike[str]]) -> list[Op]:
    """Import each ops file (once per process) and return the ops they declare.

    A file that cannot be read or imported, or whose declarations are wrong, raises a
    `UsageError`; the ops it had declared before the problem are withdrawn again.
    """
    from ..util.modules import import_file

    declared: list[Op] = []
    for given in paths:
        path = Path(given)
        key = path.resolve()
        if key not in _LOADED:
            before = set(registry._REGISTRY)
            try:
                import_file(path, f"--ops {path}", prefix="gradcheck_ops")
            except Exception:
                for added in set(registry._REGISTRY) - before:
                    del registry._REGISTRY[added]
                raise
            _LOADED[key] = [op for op in registry.all_ops() if op.name not in before]
        declared += _LOADED[key]
    return declared


def forget_ops_files(paths: Iterable[str | os.PathLike[str]]) -> None:
    """Withdraw the ops these files declared, so that `load_ops_files` imports them afresh
    (`run --watch`, after one is saved)."""
    for given in paths:
        for declared in _LOADED.pop(Path(given).resolve(), []):
            registry._REGISTRY.pop(declared.name, None)


def ops_files_declaring(names: Iterable[str]) -> list[str]:
    """The loaded ops files that declared any of these ops, relative to the working folder
    where inside it (the `--ops` a command needs for them)."""
    wanted = set(names)
    return [_shown(path) for path, ops in _LOADED.items() if wanted & {op.name for op in ops}]


def loaded_ops_files() -> tuple[str, ...]:
    """The ops files loaded so far in this process: what a worker loads before the engine."""
    return tuple(str(path) for path in _LOADED)


# -- checks ----------------------------------------------------------------------------


def _origin(frame: Any) -> str:
    """``file:line`` of the declaration, the file relative to the working folder if inside."""
    return f"{_shown(frame.f_code.co_filename)}:{frame.f_lineno}"


def _shown(file: str | Path) -> str:
    """A file as messages name it: relative to the working folder where inside it."""
    with contextlib.suppress(ValueError, OSError):
        return str(Path(file).resolve().relative_to(Path.cwd().resolve()))
    return str(file)


def _parameters(
    forward: Callable[..., Any], name: str, origin: str
) -> tuple[tuple[str, ...], dict[str, Any]]:
    """The forward's positional parameters (the op's) and keyword-only ones (attributes)."""
    if not callable(forward):
        raise OpDeclarationError(f"{origin}: op {name!r}: the forward must be a function")
    try:
        signature = inspect.signature(forward)
    except (TypeError, ValueError):
        raise OpDeclarationError(
            f"{origin}: op {name!r}: cannot read the forward's parameters; declare it with "
            "`def` (or use register_op(Op(params=..., attrs=...)))"
        ) from None
    params, attrs = [], {}
    for p in signature.parameters.values():
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty:
            params.append(p.name)
        elif p.kind is p.KEYWORD_ONLY and p.default is not p.empty:
            attrs[p.name] = p.default
        else:
            raise OpDeclarationError(
                f"{origin}: op {name!r}: parameter {p.name!r} of the forward must be a tensor "
                "parameter (positional, no default) or an attribute (after `*`, with a default)"
            )
    return tuple(params), attrs


def _build(origin: str, **fields: Any) -> Op:
    where = f"{origin}: op {fields['name']!r}"
    _check_name(where, fields["name"])
    params, attrs, variadic = fields["params"], dict(fields["attrs"]), fields["variadic"]
    if not params or (variadic and len(params) != 1):
        raise OpDeclarationError(
            f"{where}: needs {'exactly one list parameter' if variadic else 'tensor parameters'}"
        )
    for what, names in (("parameter", params), ("attribute", attrs)):
        for n in names:
            if not (isinstance(n, str) and n.isidentifier()) or keyword.iskeyword(n):
                raise OpDeclarationError(f"{where}: {what} name {n!r} is not an identifier")
    if set(params) & set(attrs) or len(set(params)) != len(params):
        raise OpDeclarationError(f"{where}: parameter and attribute names must differ")
    if fields["shape"] is None:
        raise OpDeclarationError(
            f"{where}: no shape rule; pass shape=, e.g. gradcheck.same_shape (elementwise "
            "unary) or gradcheck.broadcast_shapes (elementwise, broadcasting), or a function "
            "of the argument shapes (and attributes) returning the output's shape"
        )
    vjps, jvps = tuple(fields["vjps"]), tuple(fields.get("jvps", ()))
    expected = 1 if variadic else len(params)
    listed = ", ".join(params)
    for what, given in (("VJP", vjps), ("JVP", jvps)):
        if len(given) not in (0, expected):
            raise OpDeclarationError(
                f"{where}: {len(given)} {what}(s) for {expected} parameter(s) ({listed}): give "
                "one per parameter, in order, or none (then the builtin engine skips the op"
                + (" in forward mode)" if what == "JVP" else ")")
            )
    texts = _rule_texts(where, fields, expected, listed)
    args = ("xs", "i") if variadic else params
    _check_call(where, "shape", fields["shape"], ("shapes",) if variadic else params, attrs)
    _check_call(where, "forward", fields["forward"], params, attrs)
    for i, vjp in enumerate(vjps):
        _check_call(where, f"vjps[{i}]", vjp, ("g", "ans", *args), attrs)
    for i, jvp in enumerate(jvps):
        _check_call(where, f"jvps[{i}]", jvp, ("t", "ans", *args), attrs)
    if fields["tf"] is not None:
        _check_call(where, "tf", fields["tf"], ("tf", *params), attrs)
    tf_name = fields["tf_name"] or ("user builder" if fields["tf"] is not None else None)
    try:
        return Op(
            **{**fields, **texts, "vjps": vjps, "jvps": jvps, "tf_name": tf_name, "origin": origin}
        )
    except (TypeError, ValueError) as e:
        raise OpDeclarationError(f"{where}: {e}") from None


def _rule_texts(where: str, fields: dict[str, Any], expected: int, listed: str) -> dict:
    """The rule texts, checked: strings, one per parameter; a TensorFlow spelling left out
    is the NumPy one (as the builtin declarations write it only where it differs). A
    PyTorch or JAX spelling left out is none: fixes then state the NumPy text alone."""
    texts = {}
    for key, numpy_key in (
        ("rules", None), ("tf_rules", "rules"), ("jvp_rules", None), ("tf_jvp_rules", "jvp_rules"),
        ("torch_rules", None), ("jax_rules", None), ("torch_jvp_rules", None),
        ("jax_jvp_rules", None),
    ):  # fmt: skip
        given = fields.get(key) or ()
        if isinstance(given, str) or not all(isinstance(t, str) and t.strip() for t in given):
            raise OpDeclarationError(
                f"{where}: {key} must be a list of rule texts (strings), one per parameter"
            )
        if given and len(given) != expected:
            raise OpDeclarationError(
                f"{where}: {len(given)} text(s) in {key} for {expected} parameter(s) ({listed})"
            )
        texts[key] = tuple(given) or (texts[numpy_key] if numpy_key else ())
    return texts


def _check_name(where: str, name: str) -> None:
    if not (isinstance(name, str) and name.isidentifier()) or keyword.iskeyword(name):
        raise OpDeclarationError(f"{where}: an op's name must be a Python identifier")
    if name.startswith("_") or name in RESERVED:
        raise OpDeclarationError(
            f"{where}: the name is taken by the engine protocol (or starts with '_'); rename it"
        )


def _check_call(
    where: str, what: str, fn: Any, positional: Sequence[str], attrs: dict[str, Any]
) -> None:
    """`fn` can be called as gradcheck will call it: positionally, then attributes by name."""
    if not callable(fn):
        raise OpDeclarationError(f"{where}: {what} must be a function, not {type(fn).__name__}")
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # a NumPy ufunc or a builtin: nothing to read, it will speak for itself
    try:
        signature.bind(*positional, **attrs)
    except TypeError as e:
        call = ", ".join([*positional, *(f"{k}=..." for k in attrs)])
        raise OpDeclarationError(
            f"{where}: {what} cannot be called as {what.split('[')[0]}({call}): {e}"
        ) from None


def _register(declared: Op) -> Op:
    existing = registry._REGISTRY.get(declared.name)
    where = f"{declared.origin}: op {declared.name!r}"
    if existing is not None and existing.origin is None:
        raise OpDeclarationError(
            f"{where}: shadows the builtin op {declared.name} ({existing.doc}); "
            "a user op needs a name of its own"
        )
    if existing is not None and existing.origin != declared.origin:
        raise OpDeclarationError(f"{where}: declared twice (first at {existing.origin})")
    return registry.register(declared)
