"""Ops that lay x's elements out anew (SPEC §3.1): pad, tile, repeat, roll, dilate, undilate.

Every one is linear in x, so its JVP is the op itself on the tangent, and its VJP sends
each element of g back to the element of x it was copied from, adding where one element
was copied to several places: a reflected or symmetric pad's mirrored borders, a tile's
copies, a repeat's runs. Those VJPs scatter-add (`SCATTER_ADD`, gathers' adjoint), or
reshape and sum (tile), so that they stay differentiable on the builtin engine's tensors;
roll's is roll back, dilate's and undilate's each other's.

`dilate` and `undilate` are needle's: `dilation` zeros after every element along each of
`axes` (an axis of size n becomes n * (dilation + 1), trailing zeros included), and the
slice that takes them out again (every (dilation + 1)-th element).
"""

from __future__ import annotations

from ..util.lazy_numpy import np
from .broadcast import fmt_shape, normalize_axes, normalize_axis
from .gathers import SCATTER_ADD
from .registry import Op, Shape, ShapeError, register

MODES = ("constant", "reflect", "symmetric")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int_or_ints(value: object, what: str) -> list[int] | int:
    if _is_int(value):
        return value  # type: ignore[return-value]
    if isinstance(value, (list, tuple)) and all(_is_int(v) for v in value):
        return list(value)
    raise ShapeError(f"{what} must be an integer or a list of integers, got {value!r}")


# -- pad ---------------------------------------------------------------------------------
def _pairs(x: Shape, paddings: object) -> list[tuple[int, int]]:
    rank = len(x)
    flat = isinstance(paddings, (list, tuple)) and any(_is_int(p) for p in paddings)
    if not isinstance(paddings, (list, tuple)) or flat:
        raise ShapeError(
            f"paddings must be one [before, after] pair per axis of x {fmt_shape(x)} "
            f"(a list of {rank} pairs), got {paddings!r}"
        )
    if len(paddings) != rank:
        raise ShapeError(
            f"paddings has {len(paddings)} pairs; x {fmt_shape(x)} has {rank} axes, "
            "one [before, after] pair each"
        )
    pairs = []
    for axis, pair in enumerate(paddings):
        if not isinstance(pair, (list, tuple)) or len(pair) != 2 or not all(map(_is_int, pair)):
            raise ShapeError(
                f"paddings[{axis}] must be a [before, after] pair of integers, got {pair!r}"
            )
        if min(pair) < 0:
            raise ShapeError(f"paddings[{axis}] is {list(pair)}: a pad must be >= 0")
        pairs.append((pair[0], pair[1]))
    return pairs


def _pad_shape(x: Shape, paddings: object = None, mode: object = "constant",
               constant_values: object = 0) -> Shape:  # fmt: skip
    if mode not in MODES:
        raise ShapeError(f"mode must be 'constant', 'reflect' or 'symmetric', got {mode!r}")
    if isinstance(constant_values, bool) or not isinstance(constant_values, (int, float)):
        raise ShapeError(f"constant_values must be a number, got {constant_values!r}")
    if mode != "constant" and constant_values != 0:
        raise ShapeError(f"constant_values applies to mode 'constant' only, not {mode!r}")
    pairs = _pairs(x, paddings)
    if mode != "constant":  # TensorFlow's MirrorPad refuses more (NumPy would reflect again)
        for axis, (pair, size) in enumerate(zip(pairs, x, strict=True)):
            most = size - 1 if mode == "reflect" else size
            if max(pair) > most:
                rule = "less than" if mode == "reflect" else "at most"
                raise ShapeError(
                    f"paddings[{axis}] is {list(pair)}: mode {mode!r} pads {rule} the size of "
                    f"the axis, {size} (at most {most})"
                )
    return tuple(size + before + after for (before, after), size in zip(pairs, x, strict=True))


def _pad(x, paddings, mode, constant_values):
    if not paddings:  # a scalar: nothing to pad (np.pad refuses an empty pad_width)
        return x
    if mode == "constant":
        return np.pad(x, paddings, mode="constant", constant_values=constant_values)
    return np.pad(x, paddings, mode=mode)


def _pad_sources(shape, paddings, mode):
    """For every element of the padded array, 1 + the flat place in x it was copied
    from, or 0 for a constant: pad's VJP adds up g by these."""
    sources = np.arange(1, np.prod(shape, dtype=int) + 1).reshape(shape)
    return np.pad(sources, paddings, mode=mode) if paddings else sources


def _pad_vjp(g, ans, x, paddings, mode, constant_values):
    if mode == "constant":  # the padding is a constant: g's middle, x's own places
        return g[tuple(slice(b, b + n) for (b, _), n in zip(paddings, x.shape, strict=True))]
    # Mirrored borders copy elements of x: their g adds to those elements'.
    sources = np.reshape(_pad_sources(x.shape, paddings, mode), [-1])
    flat = SCATTER_ADD(np.reshape(g, [-1]), indices=sources, shape=(x.size + 1,), axis=0)
    return np.reshape(flat[1:], x.shape)


# -- tile --------------------------------------------------------------------------------
def _tile_shape(x: Shape, reps: object = None) -> Shape:
    if not isinstance(reps, (list, tuple)) or not all(map(_is_int, reps)):
        raise ShapeError(f"reps must be a list of integers, one per axis of x, got {reps!r}")
    if len(reps) != len(x):
        raise ShapeError(
            f"reps {list(reps)} has {len(reps)} entries; x {fmt_shape(x)} has {len(x)} axes"
        )
    if any(r < 0 for r in reps):
        raise ShapeError(f"reps {list(reps)}: every rep must be >= 0")
    return tuple(r * n for r, n in zip(reps, x, strict=True))


def _tile_vjp(g, ans, x, reps):
    # Axis a of g is reps[a] copies of x's: split it in two, (copy, place), and sum the copies.
    split = [d for r, n in zip(reps, x.shape, strict=True) for d in (r, n)]
    return np.sum(np.reshape(g, split), axis=tuple(range(0, 2 * x.ndim, 2)))


# -- repeat ------------------------------------------------------------------------------
def _repeat_shape(x: Shape, repeats: object = None, axis: object = None) -> Shape:
    counts = _int_or_ints(repeats, "repeats")
    size = 1
    for n in x:
        size *= n
    at = None if axis is None else normalize_axis(axis, len(x))
    n = size if at is None else x[at]
    along = "x's elements (axis=None flattens)" if at is None else f"axis {at} of x"
    if isinstance(counts, list):
        if len(counts) != n:
            raise ShapeError(f"repeats has {len(counts)} counts; {along} has {n}: one count each")
        if any(c < 0 for c in counts):
            raise ShapeError(f"repeats {counts}: every count must be >= 0")
        total = sum(counts)
    else:
        if counts < 0:
            raise ShapeError(f"repeats must be >= 0, got {counts}")
        total = counts * n
    return (total,) if at is None else (*x[:at], total, *x[at + 1 :])


def _repeat_vjp(g, ans, x, repeats, axis):
    at = 0 if axis is None else axis % x.ndim
    shape = (x.size,) if axis is None else x.shape
    sources = np.repeat(np.arange(shape[at]), repeats)  # where each of g's slices came from
    return np.reshape(SCATTER_ADD(g, indices=sources, shape=shape, axis=at), x.shape)


# -- roll --------------------------------------------------------------------------------
def _roll_shape(x: Shape, shift: object = None, axis: object = None) -> Shape:
    shifts = _int_or_ints(shift, "shift")
    if axis is None:
        if not _is_int(shifts):
            raise ShapeError(f"axis=None rolls x flattened, by an integer shift; got {shift!r}")
        return x
    axes = _int_or_ints(axis, "axis")
    if _is_int(axes) != _is_int(shifts) or (
        isinstance(axes, list) and len(axes) != len(shifts)  # type: ignore[arg-type]
    ):
        raise ShapeError(
            f"shift {shift!r} and axis {axis!r} must be two integers or two lists of one length"
        )
    normalize_axes(axes, len(x))  # in range, none twice
    return x


def _roll(x, shift, axis):
    return np.roll(x, shift, tuple(axis) if isinstance(axis, list) else axis)


def _negated(shift):
    return [-s for s in shift] if isinstance(shift, list) else -shift


def _tf_roll(tf, x, shift, axis):
    if axis is None:  # tf.roll needs an axis: roll x flattened, as NumPy
        return tf.reshape(tf.roll(tf.reshape(x, [-1]), shift, 0), tf.shape(x))
    return tf.roll(x, shift, axis)


# -- dilate, undilate ----------------------------------------------------------------------
def _dilation(x: Shape, axes: object, dilation: object) -> tuple[tuple[int, ...], int]:
    if axes is None:
        raise ShapeError("axes must be an integer or a list of integers, got None")
    dilated = normalize_axes(_int_or_ints(axes, "axes"), len(x))
    if not _is_int(dilation) or dilation < 0:  # type: ignore[operator]
        raise ShapeError(f"dilation must be an integer >= 0, got {dilation!r}")
    return dilated, dilation  # type: ignore[return-value]


def _dilate_shape(x: Shape, axes: object = None, dilation: object = None) -> Shape:
    dilated, d = _dilation(x, axes, dilation)
    return tuple(n * (d + 1) if a in dilated else n for a, n in enumerate(x))


def _undilate_shape(x: Shape, axes: object = None, dilation: object = None) -> Shape:
    dilated, d = _dilation(x, axes, dilation)
    return tuple(-(-n // (d + 1)) if a in dilated else n for a, n in enumerate(x))


def _steps(ndim: int, axes, dilation) -> tuple:
    """The index that picks x's elements out of dilate(x): every (dilation + 1)-th."""
    dilated = normalize_axes(axes, ndim)
    return tuple(slice(None, None, dilation + 1) if a in dilated else slice(None)
                 for a in range(ndim))  # fmt: skip


def _dilate(x, axes, dilation):
    out = np.zeros(_dilate_shape(np.shape(x), axes, dilation), np.result_type(x))
    out[_steps(np.ndim(x), axes, dilation)] = x
    return out


def _undilate_vjp(g, ans, x, axes, dilation):
    # dilate(g) is as long as x or a little longer (x's size not a multiple of dilation + 1).
    return DILATE(g, axes=axes, dilation=dilation)[tuple(slice(0, n) for n in x.shape)]


def _tf_dilate(tf, x, axes, dilation):
    """By reshape and pad: each dilated axis split as (n, 1), padded to (n, dilation + 1)
    with zeros, and merged again."""
    for a in normalize_axes(axes, x.shape.rank):
        shape = list(x.shape)
        x = tf.reshape(x, [*shape[: a + 1], 1, *shape[a + 1 :]])
        pads = [[0, 0]] * (a + 1) + [[0, dilation]] + [[0, 0]] * (len(shape) - a - 1)
        x = tf.reshape(tf.pad(x, pads), [*shape[:a], shape[a] * (dilation + 1), *shape[a + 1 :]])
    return x


# Rule texts. `sources` for pad: 1 + where each padded element came from (0: a constant).
_PAD_SOURCES = "np.pad(np.arange(1, x.size + 1).reshape(x.shape), paddings, mode)"
_TF_PAD_SOURCES = (
    "tf.pad(tf.reshape(tf.range(1, tf.size(x) + 1), tf.shape(x)), paddings, mode.upper())"
)
# PyTorch has no symmetric pad: each padded position's source along each axis (`src`),
# gathered by advanced indexing; a constant's positions are masked out (`keep`).
_TORCH_PAD_SOURCES = (
    "p = [torch.arange(-lo, n + hi) for (lo, hi), n in zip(paddings, x.shape)]; "
    "keep = torch.stack(torch.meshgrid(*[(q >= 0) & (q < n) for q, n in zip(p, x.shape)], "
    "indexing='ij')).all(0) if mode == 'constant' else 1; "
    "src = tuple(torch.meshgrid(*[n - 1 - abs(n - 1 - abs(q)) if mode == 'reflect' else "
    "torch.where(q < 0, -q - 1, torch.where(q >= n, 2 * n - 1 - q, q)) if mode == 'symmetric' "
    "else q.clamp(0, n - 1) for q, n in zip(p, x.shape)], indexing='ij')); "
)
_TILE_SPLIT = "[d for r, n in zip(reps, x.shape) for d in (r, n)]"
_REPEAT_AT = "a = 0 if axis is None else axis % x.ndim"
_TF_REPEAT_AT = "a = 0 if axis is None else axis % len(x.shape)"
_STEPS = "tuple(slice(None, None, dilation + 1) if a in axes else slice(None) for a in range({}))"
_TF_ROLL = ("tf.reshape(tf.roll(tf.reshape({0}, [-1]), {1}, 0), tf.shape({0})) if axis is None "
            "else tf.roll({0}, {1}, axis)")  # fmt: skip

# The declarations are a table, laid out by hand: one op per block.
# fmt: off
PAD = register(Op(
    name="pad", params=("x",), attrs={"paddings": None, "mode": "constant", "constant_values": 0},
    shape=_pad_shape, forward=_pad,
    vjps=(_pad_vjp,),
    tf=lambda tf, x, paddings, mode, constant_values: tf.pad(  # a scalar's: a [0, 2] matrix
        x, paddings or tf.zeros([0, 2], tf.int32), mode.upper(), constant_values=constant_values),
    tf_name="tf.pad",
    doc="x padded by [before, after] per axis: a constant, or x mirrored ('reflect' leaves "
        "the edge out, 'symmetric' repeats it)",
    rules=(f"s = {_PAD_SOURCES}; np.bincount(s.ravel(), g.ravel(), x.size + 1)[1:]"
           ".reshape(x.shape)",),
    tf_rules=(f"s = {_TF_PAD_SOURCES}; tf.reshape(tf.math.unsorted_segment_sum(tf.reshape(g, "
              "[-1]), tf.reshape(s, [-1]), tf.size(x) + 1)[1:], tf.shape(x))",),
    jvps=(lambda t, ans, x, paddings, mode, constant_values: PAD(t, paddings=paddings, mode=mode),),
    jvp_rules=("np.pad(t, paddings, mode)",), tf_jvp_rules=("tf.pad(t, paddings, mode.upper())",),
    torch_rules=(_TORCH_PAD_SOURCES + "torch.zeros_like(x).index_put_(src, g * keep, "
                                      "accumulate=True)",),
    torch_jvp_rules=(_TORCH_PAD_SOURCES + "t[src] * keep",),
    attr_choices={
        "paddings": ([], [[1, 0]], [[2, 1]], [[0, 0], [1, 2]], [[1, 1], [0, 1]],
                     [[0, 1], [1, 0], [0, 0]], [[1, 1], [0, 0], [2, 0]]),
        "mode": MODES, "constant_values": (0, 1.5),
    },
))
register(Op(
    name="tile", params=("x",), attrs={"reps": None}, shape=_tile_shape,
    forward=lambda x, reps: np.tile(x, reps),
    vjps=(_tile_vjp,),
    tf=lambda tf, x, reps: tf.tile(x, reps), tf_name="tf.tile",
    doc="x repeated reps[a] times along each axis a (one rep per axis)",
    rules=(f"g.reshape({_TILE_SPLIT}).sum(axis=tuple(range(0, 2 * x.ndim, 2)))",),
    tf_rules=(f"tf.reduce_sum(tf.reshape(g, {_TILE_SPLIT}), list(range(0, 2 * len(x.shape), 2)))",),
    jvps=(lambda t, ans, x, reps: np.tile(t, reps),),
    jvp_rules=("np.tile(t, reps)",), tf_jvp_rules=("tf.tile(t, reps)",),
    attr_choices={"reps": ([], [2], [3], [1, 2], [2, 1], [2, 1, 2], [1, 1, 2], [1, 2, 1, 1])},
))
REPEAT = register(Op(
    name="repeat", params=("x",), attrs={"repeats": None, "axis": None}, shape=_repeat_shape,
    forward=lambda x, repeats, axis: np.repeat(x, repeats, axis),
    vjps=(_repeat_vjp,),
    tf=lambda tf, x, repeats, axis: tf.repeat(x, repeats, axis), tf_name="tf.repeat",
    doc="each element (axis=None: of x flattened) or slice along axis repeated; repeats an "
        "int or one count each",
    rules=(f"{_REPEAT_AT}; z = np.zeros_like(x.ravel() if axis is None else x); "
           "np.add.at(z, (slice(None),) * a + (np.repeat(np.arange(z.shape[a]), repeats),), g); "
           "z.reshape(x.shape)",),
    tf_rules=(f"{_TF_REPEAT_AT}; n = tf.size(x) if axis is None else x.shape[a]; "
              "tf.reshape(tf.experimental.numpy.moveaxis(tf.math.unsorted_segment_sum("
              "tf.experimental.numpy.moveaxis(g, a, 0), tf.repeat(tf.range(n), repeats), n), 0, a),"
              " tf.shape(x))",),
    jvps=(lambda t, ans, x, repeats, axis: REPEAT(t, repeats=repeats, axis=axis),),
    jvp_rules=("np.repeat(t, repeats, axis)",), tf_jvp_rules=("tf.repeat(t, repeats, axis)",),
    torch_rules=("a = 0 if axis is None else axis % x.ndim; "
                 "z = torch.zeros_like(x.reshape(-1) if axis is None else x); "
                 "z.index_add(a, torch.repeat_interleave(torch.arange(z.shape[a]), "
                 "torch.tensor(repeats)), g).reshape(x.shape)",),
    torch_jvp_rules=("torch.repeat_interleave(t, torch.tensor(repeats), axis)",),
    jax_rules=("a = 0 if axis is None else axis % x.ndim; "
               "z = jnp.zeros_like(x.ravel() if axis is None else x); "
               "z.at[(slice(None),) * a + (jnp.repeat(jnp.arange(z.shape[a]), "
               "jnp.array(repeats)),)].add(g).reshape(x.shape)",),
    jax_jvp_rules=("jnp.repeat(t, jnp.array(repeats), axis)",),
    attr_choices={"repeats": (2, [1, 2], [2, 0, 1], 3, [1, 2, 3, 1])},
))
ROLL = register(Op(
    name="roll", params=("x",), attrs={"shift": None, "axis": None}, shape=_roll_shape,
    forward=_roll,
    vjps=(lambda g, ans, x, shift, axis: ROLL(g, shift=_negated(shift), axis=axis),),
    tf=_tf_roll, tf_name="tf.roll",
    doc="x's elements shifted along axis (axis=None: x flattened), those past the end "
        "coming round to the front",
    rules=("np.roll(g, np.negative(shift), axis)",),
    tf_rules=(_TF_ROLL.format("g", "tf.negative(shift)"),),
    jvps=(lambda t, ans, x, shift, axis: ROLL(t, shift=shift, axis=axis),),
    jvp_rules=("np.roll(t, shift, axis)",), tf_jvp_rules=(_TF_ROLL.format("t", "shift"),),
    # shift is an int or a list: negated as a tensor.
    torch_rules=("torch.roll(g, (-torch.tensor(shift)).tolist(), axis)",),
    jax_rules=("jnp.roll(g, -jnp.array(shift), axis)",),
    attr_choices={"shift": (1, -1, 2, [1, -1], [-2, 1]), "axis": (None, 0, -1, [0, 1], [1, -1])},
))
DILATE = register(Op(
    name="dilate", params=("x",), attrs={"axes": None, "dilation": None}, shape=_dilate_shape,
    forward=_dilate,
    vjps=(lambda g, ans, x, axes, dilation: g[_steps(g.ndim, axes, dilation)],),
    tf=_tf_dilate, tf_name="tf.reshape, tf.pad",
    doc="needle's dilate: dilation zeros after each element along each of axes",
    rules=(f"g[{_STEPS.format('g.ndim')}]",), tf_rules=(f"g[{_STEPS.format('len(g.shape)')}]",),
    jvps=(lambda t, ans, x, axes, dilation: DILATE(t, axes=axes, dilation=dilation),),
    jvp_rules=(f"z = np.zeros_like(y); z[{_STEPS.format('t.ndim')}] = t; z",),
    tf_jvp_rules=(f"tf.Variable(tf.zeros_like(y))[{_STEPS.format('len(t.shape)')}].assign(t)",),
    attr_choices={"axes": (0, -1, [0, 1], [0, -1]), "dilation": (1, 2, 0)},
))
register(Op(
    name="undilate", params=("x",), attrs={"axes": None, "dilation": None},
    shape=_undilate_shape,
    forward=lambda x, axes, dilation: x[_steps(np.ndim(x), axes, dilation)],
    vjps=(_undilate_vjp,),
    tf=lambda tf, x, axes, dilation: x[_steps(x.shape.rank, axes, dilation)],
    tf_name="tf.strided_slice",
    doc="needle's undilate: every (dilation + 1)-th element along each of axes",
    rules=(f"z = np.zeros_like(x); z[{_STEPS.format('x.ndim')}] = g; z",),
    tf_rules=(f"tf.Variable(tf.zeros_like(x))[{_STEPS.format('len(x.shape)')}].assign(g)",),
    jvps=(lambda t, ans, x, axes, dilation: t[_steps(t.ndim, axes, dilation)],),
    jvp_rules=(f"t[{_STEPS.format('t.ndim')}]",), tf_jvp_rules=(f"t[{_STEPS.format('len(t.shape)')}]",),  # noqa: E501
    attr_choices={"axes": (0, -1, [0, 1], [0, -1]), "dilation": (1, 2, 0)},
))
# fmt: on
