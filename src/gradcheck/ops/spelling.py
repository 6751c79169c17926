"""The NumPy rule texts translated to PyTorch and JAX spelling, for the builtin ops that
declare no such texts of their own (see `ops.registry`'s docstring).

The translation is mechanical, and valid only where the two libraries' functions mean
the same as NumPy's under the new name; tests/test_rule_texts_torch_jax.py evaluates
every translated text with real tensors, so an op whose text it gets wrong must
declare its own.
"""

from __future__ import annotations

import re

# Applied in order; each a (pattern, replacement) on the NumPy text.
_TORCH = (
    (r"\bnp\.transpose\(", "torch.permute("),
    (r"\bnp\.concatenate\(", "torch.cat("),
    (r"\bnp\.expand_dims\(", "torch.unsqueeze("),
    (r"\bnp\.", "torch."),
    (r"(?<![.\w])erf\(", "torch.erf("),  # NumPy's texts call the op: NumPy has no erf
    (r"\baxis=", "dim="),
    (r"\bkeepdims=", "keepdim="),
    (r"\baxis([12])=", r"dim\1="),  # diagonal's
)
_JAX = (
    # JAX arrays are immutable: a scatter into zeros is a functional update of them.
    (
        r"^z = np\.zeros_like\((\w+)\); np\.add\.at\(z, (.*), (\w+)\); z$",
        r"jnp.zeros_like(\1).at[\2].add(\3)",
    ),
    (r"^z = np\.zeros_like\((\w+)\); z\[(.*)\] = (\w+); z$", r"jnp.zeros_like(\1).at[\2].set(\3)"),
    (r"\bnp\.", "jnp."),
    (r"(?<![.\w])erf\(", "jax.scipy.special.erf("),
)


def translate(text: str, spelling: str) -> str:
    """`text`, a NumPy rule text, in `spelling` "torch" or "jax"."""
    for pattern, replacement in _TORCH if spelling == "torch" else _JAX:
        text = re.sub(pattern, replacement, text)
    return text
