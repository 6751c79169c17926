"""Every VJP's and JVP's rule text in PyTorch and JAX spelling computes what it says.

The sibling of tests/test_rule_texts.py, on the same applications: each op's torch text
(declared, or its NumPy text translated by `ops.spelling`) is evaluated with float64
torch tensors, and its jax text with float64 jax arrays, in the names the registry's
docstring defines, and compared with the registry's own VJP or JVP. The namespace holds
only the library (``torch``; ``jax`` and ``jnp``) and the rule names: no registry op
and no NumPy, so a text that leans on either fails.
"""

from __future__ import annotations

import numpy as np
import pytest

from gradcheck.ops import all_ops, get_op, unbroadcast
from gradcheck.ops.conv import RULE_NAMES
from test_rule_texts import (
    applications,
    assert_tangents,
    declared,
    evaluate,
    jvp_setup,
    names,
    setup,
    want,
)

torch = pytest.importorskip("torch")
jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402  (after x64 is on)
import jax.scipy.special  # noqa: E402  (jax.scipy.special.erf in the texts)

SPELLINGS = ("torch", "jax")


def _library(spelling: str) -> dict:
    return {"torch": torch} if spelling == "torch" else {"jax": jax, "jnp": jnp}


def _convert(value, spelling: str):
    """A name's value as the library holds it: arrays as its tensors, lists and tuples of
    them element by element, NumPy scalars as Python's; anything else as it is."""
    if isinstance(value, np.ndarray):
        return torch.from_numpy(value.copy()) if spelling == "torch" else jnp.asarray(value)
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, tuple)) and any(
        isinstance(v, (np.ndarray, np.generic)) for v in value
    ):
        return type(value)(_convert(v, spelling) for v in value)
    return value


def _numpy(value):
    """A text's value back in NumPy: a tensor, or a tuple of them (several outputs)."""
    if isinstance(value, tuple):
        return tuple(_numpy(v) for v in value)
    if isinstance(value, torch.Tensor):
        return value.detach().numpy()
    return np.asarray(value)


def namespace(op, names_: dict, spelling: str) -> dict:
    """The rule names as the library's values, without the registry's ops (the NumPy
    texts' stand-ins for what NumPy lacks) and the convolutions' helpers."""
    ops = {o.name: o for o in all_ops()}
    kept = {
        key: _convert(v, spelling)
        for key, v in names_.items()
        if not (key in ops and v is ops[key]) and key not in RULE_NAMES
    }
    return {**_library(spelling), **kept}


def test_every_op_has_both_spellings_of_every_rule():
    """A text for each differentiable parameter, none for an integer one."""
    for op in all_ops():
        for spelling in SPELLINGS:
            for mode in ("rev", "fwd"):
                texts = [op.rule(i, spelling, mode) for i in range(len(op.params))]
                assert declared(texts, op), (op.name, spelling, mode)


SPELLED = [  # every application, in each spelling
    pytest.param(*param.values, spelling, id=f"{param.id}-{spelling}")
    for spelling in SPELLINGS
    for param in applications()
]


def test_a_translated_text_spells_the_library_not_numpy():
    tanh = get_op("tanh")
    assert tanh.rule(0, "torch") == "g * (1 - torch.tanh(x)**2)"
    assert tanh.rule(0, "jax") == "g * (1 - jnp.tanh(x)**2)"
    for op in all_ops():
        for spelling in SPELLINGS:
            for mode in ("rev", "fwd"):
                for i in range(len(op.params)):
                    assert "np." not in op.rule(i, spelling, mode).replace("jnp.", "")


@pytest.mark.parametrize(("name", "k", "i", "spelling"), SPELLED)
def test_the_text_computes_the_vjp(name, k, i, spelling):
    op, args, attrs, y, g = setup(name, k)
    scope = namespace(op, names(op, g, y, args, attrs, i), spelling)
    got = np.asarray(_numpy(evaluate(op.rule(i, spelling), scope)), np.float64)
    expected = want(op, args, attrs, y, g, i)
    np.testing.assert_allclose(unbroadcast(got, args[i].shape), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(("name", "k", "i", "spelling"), SPELLED)
def test_the_text_computes_the_jvp(name, k, i, spelling):
    op, names_, _, expected = jvp_setup(name, k, i)
    got = _numpy(evaluate(op.rule(i, spelling, "fwd"), namespace(op, names_, spelling)))
    assert_tangents(got, expected)
