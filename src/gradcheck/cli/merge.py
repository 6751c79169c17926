"""`gradcheck merge`: the JSON reports of a run's shards (`run --shard K/N`) as one run.

The cases of every report, in case-file order; the root causes and the report card
recomputed over all of them; the rich report here, and `--output`'s file in the format
its suffix names; the exit code one run of every case would have had. Reports from
different gradcheck versions or engines are refused unless `--force`; a case in two
reports is an error naming both files, so that no case is dropped or counted twice.
"""

import json
from pathlib import Path
from typing import Annotated

import typer

from ..errors import UsageError
from .common import app, boundary


@app.command()
@boundary
def merge(
    reports: Annotated[
        list[Path], typer.Argument(help="The shards' JSON reports (run --format json).")
    ],
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Write the merged report here (atomically), in its suffix's format: "
            ".json, .xml (JUnit), .html; anything else the plain-text report.",
        ),
    ] = None,
    force: Annotated[
        bool,
        typer.Option(help="Merge reports of different gradcheck versions or engines too."),
    ] = False,
    quiet: Annotated[bool, typer.Option("-q", "--quiet", help="Failures and the summary only.")] = (
        False
    ),
) -> None:
    """Merge the JSON reports of a run's shards into one report, as one run."""
    from ..diagnosis import diagnose_run
    from ..report.json_reader import ReportError, read_run
    from ..results import RunResult
    from .reports import Report

    runs, versions, where = [], {}, {}
    for path in reports:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            run = read_run(data)
        except OSError as e:
            raise UsageError(f"cannot read {path}: {e.strerror or e}") from None
        except (ValueError, ReportError) as e:
            raise UsageError(f"{path}: {e}") from None
        versions[path] = (str(data.get("version")), run.engine)
        for case in run.cases:
            if case.id in where:
                raise UsageError(
                    f"case {case.id} is in two reports, {where[case.id]} and {path}: "
                    "were they made with the same --shard N and cases?"
                )
            where[case.id] = path
        runs.append(run)
    if not force and len(set(versions.values())) > 1:
        said = "; ".join(f"{p}: gradcheck {v}, engine {e}" for p, (v, e) in versions.items())
        raise UsageError(f"the reports are of different runs ({said}); --force merges them")
    cases = sorted((c for run in runs for c in run.cases), key=lambda c: (c.file, c.line))
    merged = RunResult(
        engine=runs[0].engine if runs else "",
        reference=" / ".join(dict.fromkeys(run.reference for run in runs)),
        cases=cases,
        duration_s=sum(run.duration_s for run in runs),  # the time one machine would take
        interrupted=next((run.interrupted for run in runs if run.interrupted), None),
        engine_origin=runs[0].engine_origin if runs else None,
        deselected=max((run.deselected for run in runs), default=0),  # -k's, in every shard
        nothing_found=None if cases else "the reports hold no cases",
        startup_s=0.0,
    )
    diagnose_run(merged)
    report = Report(None, output, verbose=False, quiet=quiet, durations=None, repro=None)
    problem = report.write(merged)
    if problem:
        raise UsageError(problem)
    raise typer.Exit(merged.exit_code)
