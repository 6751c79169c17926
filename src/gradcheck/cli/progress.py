"""`run`'s transient progress bar, which says so while TensorFlow starts.

Its own module, imported when a run starts, so that rich's progress machinery costs
nothing to `gradcheck --help`, `ops` or `list`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TimeElapsedColumn,
)
from rich.text import Text

from ..results import CaseResult
from ..runner import starting_tensorflow

PROGRESS_MIN_CASES = 5  # shorter runs finish before a bar would be worth drawing


class _Doing(ProgressColumn):
    """What the run is doing, drawn at every refresh: starting TensorFlow, or checking."""

    def render(self, task: Task) -> Text:
        return Text("starting TensorFlow" if starting_tensorflow() else task.description)


@contextlib.contextmanager
def progress(
    console: Console, total: int, *, show: bool
) -> Iterator[Callable[[CaseResult], None] | None]:
    """A transient progress bar while the cases run, yielding the runner's `on_result`.

    Only on a terminal, for runs of more than PROGRESS_MIN_CASES cases or while
    TensorFlow starts (that takes seconds), and never when stdout carries the JSON or
    JUnit report.
    """
    busy = total > PROGRESS_MIN_CASES or (total > 0 and starting_tensorflow())
    if not (show and console.is_terminal and busy):
        yield None
        return
    bar = Progress(
        _Doing(), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=console, transient=True,
    )  # fmt: skip
    with bar:
        task = bar.add_task("checking", total=total)
        yield lambda case: bar.advance(task)
