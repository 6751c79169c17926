"""What the tables that write a framework's ops as registry ops share (`aten_table` for
PyTorch's ATen ops, `lax_table` for JAX's primitives): an operand as an entry sees it
(`V`), what an entry may emit besides its texts (`Emit`), and what it raises where the
registry has no exact equivalent (`Unmapped`, by `need`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


class Unmapped(Exception):
    """No registry op says this op with these arguments; the message says why."""


def need(condition: bool, why: str) -> None:
    if not condition:
        raise Unmapped(why)


@dataclass
class V:
    """An operand: its shape, whether it is a constant (depends on no differentiated
    input), its traced value (`evaluate`d when first read: the framework's tensor, or a
    NumPy array) and its text in the expression (`named` when first read, so a constant an
    entry reads only by value, a where's mask, adds no input), and its dtype where the
    table keeps it."""

    shape: tuple[int, ...]
    const: bool
    evaluate: Callable[[], Any]
    named: Callable[[], str]
    dtype: Any = None
    _text: str | None = None

    @property
    def value(self) -> Any:
        return self.evaluate()

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = self.named()
        return self._text

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __str__(self) -> str:
        return self.text


class Emit:
    """What an entry may do beyond returning texts: bind an intermediate value (an op with
    several outputs) or add a constant derived from a constant argument."""

    def __init__(self, bind: Callable[[str, str], str], constant: Callable[..., str]) -> None:
        self.bind = bind  # (text, name wanted) -> name
        self.constant = constant  # (array, name wanted, integer) -> name
