"""Catalogue faults as engine files, for tests that run the command line
(`--engine tests/planted_engines.py:LeadingOnly`): the builtin engine with one fault."""

from gradcheck.diagnosis.faults.planted import FAULTS, FaultyEngine


class LeadingOnly(FaultyEngine):
    """The seed question's unbroadcast: leading axes summed, size-1 axes not."""

    def __init__(self) -> None:
        super().__init__(FAULTS["broadcast.leading-only"])


class TanhFromInput(FaultyEngine):
    """tanh's VJP computed from its input instead of its output: `g * (1 - x**2)`."""

    def __init__(self) -> None:
        super().__init__(FAULTS["tanh.from-input"])


class ConcatFirstAxis(FaultyEngine):
    """concat's VJP splits the gradient along the first axis whatever `axis` is."""

    def __init__(self) -> None:
        super().__init__(FAULTS["concat.first-axis"])
