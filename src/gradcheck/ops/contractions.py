"""Contractions (SPEC §3.1): tensordot(a, b, axes) and einsum("ij,jk->ik", a, b, ...).

Their VJPs are contractions again, written with the ops themselves (`TENSORDOT`,
`EINSUM` called like functions), so that the builtin engine's second order records them.
einsum's VJP for an operand is the einsum of the cotangent with the other operands; where
the operand repeats an index (``"ii->i"``, the classic bug: the gradient belongs on the
diagonal only) each repeat gets a fresh letter joined to the first by an identity matrix,
and an index only that operand has (summed there alone) is broadcast back by ones.
einsum is variadic with its equation a leading attribute (`Op.leading`): written first,
``einsum("ij,jk->ik", a, b)``; engines get ``einsum(*operands, equation=...)``.
"""

from __future__ import annotations

from functools import lru_cache
from string import ascii_letters

from ..util.lazy_numpy import np
from .broadcast import fmt_shape
from .registry import Op, Shape, ShapeError, register

# --- tensordot --------------------------------------------------------------------------


def tensordot_axes(axes: object, ra: int, rb: int) -> tuple[list[int], list[int]]:
    """tensordot's `axes` (an int N: a's last N with b's first N; or a pair of an int or a
    list each) as the contracted axes of a and of b, non-negative, pairwise."""
    if isinstance(axes, int) and not isinstance(axes, bool):
        if not 0 <= axes <= min(ra, rb):
            raise ShapeError(
                f"axes={axes} contracts that many axes of each side; it must be in 0..{min(ra, rb)}"
                f" for ranks {ra} and {rb}"
            )
        return list(range(ra - axes, ra)), list(range(axes))
    if not isinstance(axes, (list, tuple)) or len(axes) != 2:
        raise ShapeError(f"axes must be an integer or a pair [axes of a, axes of b], got {axes!r}")
    pair = []
    for side, rank, given in (("a", ra, axes[0]), ("b", rb, axes[1])):
        items = list(given) if isinstance(given, (list, tuple)) else [given]
        if any(isinstance(i, bool) or not isinstance(i, int) for i in items):
            raise ShapeError(f"axes of {side} must be integers, got {given!r}")
        for i in items:
            if not -rank <= i < rank:
                raise ShapeError(f"axes of {side}: axis {i} is out of range for rank {rank}")
        normal = [i % rank for i in items]
        if len(set(normal)) != len(normal):
            raise ShapeError(f"axes of {side} name the same axis twice: {given!r}")
        pair.append(normal)
    if len(pair[0]) != len(pair[1]):
        raise ShapeError(f"axes {axes!r} pairs {len(pair[0])} axes of a with {len(pair[1])} of b")
    return pair[0], pair[1]


def _tensordot_shape(a: Shape, b: Shape, axes: object = None) -> Shape:
    if axes is None:
        raise ShapeError("axes is required: an integer or a pair [axes of a, axes of b]")
    aa, ab = tensordot_axes(axes, len(a), len(b))
    for i, j in zip(aa, ab, strict=True):
        if a[i] != b[j]:
            raise ShapeError(
                f"axes {axes!r}: axis {i} of a has size {a[i]}, axis {j} of b {b[j]} "
                f"(shapes {fmt_shape(a)} and {fmt_shape(b)})"
            )
    return (
        *(d for k, d in enumerate(a) if k not in aa),
        *(d for k, d in enumerate(b) if k not in ab),
    )


def _free(axes: list[int], rank: int) -> list[int]:
    return [k for k in range(rank) if k not in axes]


def _tensordot_vjp_a(g, ans, a, b, axes):
    aa, ab = tensordot_axes(axes, a.ndim, b.ndim)
    free_a, free_b = _free(aa, a.ndim), _free(ab, b.ndim)
    r = TENSORDOT(g, b, axes=[list(range(len(free_a), g.ndim)), free_b])
    # r's axes: a's free ones, then a's contracted ones in the order b's left over stand
    return np.transpose(
        r, [int(k) for k in np.argsort(free_a + [aa[ab.index(j)] for j in sorted(ab)])]
    )


def _tensordot_vjp_b(g, ans, a, b, axes):
    aa, ab = tensordot_axes(axes, a.ndim, b.ndim)
    free_a, free_b = _free(aa, a.ndim), _free(ab, b.ndim)
    r = TENSORDOT(a, g, axes=[free_a, list(range(len(free_a)))])
    return np.transpose(
        r, [int(k) for k in np.argsort([ab[aa.index(j)] for j in sorted(aa)] + free_b)]
    )


def _tensordot_jvp(i):
    def jvp(t, ans, a, b, axes):
        pair = list(tensordot_axes(axes, a.ndim, b.ndim))
        return TENSORDOT(t, b, axes=pair) if i == 0 else TENSORDOT(a, t, axes=pair)

    return jvp


def _tf_tensordot(tf, a, b, axes):
    return tf.tensordot(a, b, list(tensordot_axes(axes, a.shape.rank, b.shape.rank)))


# --- einsum -----------------------------------------------------------------------------


@lru_cache(maxsize=256)
def einsum_parts(equation: object, count: int) -> tuple[tuple[str, ...], str]:
    """The equation's subscripts, one per operand, and the output's (implicit mode, no
    ``->``: the indices used once, sorted, as NumPy and TensorFlow do)."""
    if not isinstance(equation, str) or not equation:
        raise ShapeError(f"equation must be a string such as 'ij,jk->ik', got {equation!r}")
    text = equation.replace(" ", "")
    if "..." in text:
        raise ShapeError(f"equation {equation!r}: '...' is not supported; name every axis")
    sides = text.split("->")
    if len(sides) > 2:
        raise ShapeError(f"equation {equation!r} has more than one '->'")
    bad = sorted({c for c in text.replace("->", "").replace(",", "") if c not in ascii_letters})
    if bad:
        raise ShapeError(
            f"equation {equation!r}: an index is one letter a-z or A-Z, got {bad[0]!r}"
        )
    inputs = tuple(sides[0].split(","))
    if len(inputs) != count:
        raise ShapeError(
            f"equation {equation!r} has subscripts for {len(inputs)} operand(s), got {count}"
        )
    used = "".join(inputs)
    if len(sides) == 1:
        return inputs, "".join(sorted(c for c in set(used) if used.count(c) == 1))
    output = sides[1]
    for c in output:
        if output.count(c) > 1:
            raise ShapeError(f"equation {equation!r}: the output repeats index {c!r}")
        if c not in used:
            raise ShapeError(f"equation {equation!r}: output index {c!r} is in no operand")
    return inputs, output


def _einsum_sizes(equation: object, shapes: list[Shape]) -> dict[str, int]:
    inputs, _ = einsum_parts(equation, len(shapes))
    sizes: dict[str, tuple[int, int]] = {}
    for k, (subscripts, shape) in enumerate(zip(inputs, shapes, strict=True)):
        if len(subscripts) != len(shape):
            raise ShapeError(
                f"operand {k + 1} has shape {fmt_shape(shape)} (rank {len(shape)}); its "
                f"subscripts {subscripts!r} name {len(subscripts)} axes"
            )
        for c, d in zip(subscripts, shape, strict=True):
            seen = sizes.setdefault(c, (d, k))
            if seen[0] != d:
                raise ShapeError(
                    f"index {c!r} has size {seen[0]} in operand {seen[1] + 1} and {d} in "
                    f"operand {k + 1} (shapes {', '.join(map(fmt_shape, shapes))})"
                )
    return {c: d for c, (d, _) in sizes.items()}


def _einsum_shape(shapes: list[Shape], equation: object = None) -> Shape:
    sizes = _einsum_sizes(equation, list(shapes))
    return tuple(sizes[c] for c in einsum_parts(equation, len(shapes))[1])


def einsum_adjoint(equation: str, shapes: list[Shape], i: int) -> tuple[str, list, list]:
    """Operand `i`'s VJP as an einsum: its equation (the cotangent, the other operands, the
    fill arrays), the other operands' positions and the fill as (kind, size): an identity
    for each repeat of an index in operand i, ones for an index only operand i has."""
    inputs, output = einsum_parts(equation, len(shapes))
    sizes = _einsum_sizes(equation, list(shapes))
    others = [k for k in range(len(inputs)) if k != i]
    reached = set(output) | {c for k in others for c in inputs[k]}
    fresh = iter(c for c in ascii_letters if c not in "".join(inputs))
    target, fill, fill_subscripts = [], [], []
    for c in inputs[i]:
        if c in target:  # a repeat: a fresh letter, on the diagonal with the first
            d = next(fresh)
            target.append(d)
            fill.append(("eye", sizes[c]))
            fill_subscripts.append(c + d)
        else:
            target.append(c)
            if c not in reached and inputs[i].count(c) == 1:
                fill.append(("ones", sizes[c]))
                fill_subscripts.append(c)
    subscripts = [output, *(inputs[k] for k in others), *fill_subscripts]
    return f"{','.join(subscripts)}->{''.join(target)}", others, fill


def fill_arrays(fill: list, dtype) -> list:
    return [np.eye(n, dtype=dtype) if kind == "eye" else np.ones(n, dtype) for kind, n in fill]


def _einsum_vjp(g, ans, operands, i, equation):
    adjoint, others, fill = einsum_adjoint(equation, [x.shape for x in operands], i)
    extra = fill_arrays(fill, g.dtype)
    return EINSUM([g, *(operands[k] for k in others), *extra], equation=adjoint)


def _einsum_jvp(t, ans, operands, i, equation):
    return EINSUM([*operands[:i], t, *operands[i + 1 :]], equation=equation)


_TD_A = "list(range(len(free_a), g.ndim)), free_b"
_TF_TD_A = "list(range(len(free_a), len(g.shape))), free_b"
_PERM_A = "free_a + [axes_a[axes_b.index(j)] for j in sorted(axes_b)]"
_PERM_B = "[axes_b[axes_a.index(j)] for j in sorted(axes_a)] + free_b"
# In PyTorch and JAX, whose argsort takes no list: the inverse permutation in Python.
_INVERSE = "; {0}({1}.tensordot({2}), [p.index(k) for k in range(len(p))])"
_TD_TEXTS = (
    "p = " + _PERM_A + _INVERSE.format("{0}", "{1}", "g, b, [" + _TD_A + "]"),
    "p = " + _PERM_B + _INVERSE.format("{0}", "{1}", "a, g, [free_a, list(range(len(free_a)))]"),
)

# The declarations are a table, laid out by hand: one op per block.
# fmt: off
TENSORDOT = register(Op(
    name="tensordot", params=("a", "b"), attrs={"axes": None}, shape=_tensordot_shape,
    forward=lambda a, b, axes: np.tensordot(a, b, tensordot_axes(axes, a.ndim, b.ndim)),
    vjps=(_tensordot_vjp_a, _tensordot_vjp_b),
    tf=_tf_tensordot, tf_name="tf.tensordot",
    doc="sums a's axes against b's: axes an int N (a's last N with b's first N) or a pair "
        "[axes of a, axes of b]",
    rules=(f"np.transpose(np.tensordot(g, b, [{_TD_A}]), np.argsort({_PERM_A}))",
           "np.transpose(np.tensordot(a, g, [free_a, list(range(len(free_a)))]), "
           f"np.argsort({_PERM_B}))"),
    tf_rules=(f"tf.transpose(tf.tensordot(g, b, [{_TF_TD_A}]), tf.argsort({_PERM_A}))",
              "tf.transpose(tf.tensordot(a, g, [free_a, list(range(len(free_a)))]), "
              f"tf.argsort({_PERM_B}))"),
    jvps=(_tensordot_jvp(0), _tensordot_jvp(1)),
    jvp_rules=("np.tensordot(t, b, [axes_a, axes_b])", "np.tensordot(a, t, [axes_a, axes_b])"),
    tf_jvp_rules=("tf.tensordot(t, b, [axes_a, axes_b])", "tf.tensordot(a, t, [axes_a, axes_b])"),
    torch_rules=tuple(text.format("torch.permute", "torch") for text in _TD_TEXTS),
    jax_rules=tuple(text.format("jnp.transpose", "jnp") for text in _TD_TEXTS),
    attr_choices={"axes": (1, 0, 2, [[0], [0]], [[-1], [-1]], [[0, 1], [1, 0]])},
))
EINSUM = register(Op(
    name="einsum", params=("operands",), attrs={"equation": None}, shape=_einsum_shape,
    variadic=True, leading="equation",
    forward=lambda operands, equation: np.einsum(equation, *operands),
    vjps=(_einsum_vjp,),
    tf=lambda tf, operands, equation: tf.einsum(equation, *operands), tf_name="tf.einsum",
    doc="the contraction an equation names, einsum(\"ij,jk->ik\", a, b): a repeated index "
        "takes a diagonal, an index left out of the output is summed",
    rules=("np.einsum(adjoint, g, *others, *fill)",),
    tf_rules=("tf.einsum(adjoint, g, *others, *fill)",),
    jvps=(_einsum_jvp,),
    jvp_rules=("np.einsum(equation, *operands[:i], t, *operands[i + 1:])",),
    tf_jvp_rules=("tf.einsum(equation, *operands[:i], t, *operands[i + 1:])",),
    attr_choices={"equation": ("ij->ji", "ij,jk->ik", "ii->i", "ii->", "ij,ij->i", "i,j->ij",
                               "ijk->kj", "bij,bjk->bik")},
))
# fmt: on
