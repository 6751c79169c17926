"""`gradcheck run`: its options, resolved with the config file's; then the cases are
checked and reported (`reports`)."""

import contextlib
import dataclasses
import enum
import os
import sys
from pathlib import Path
from typing import Annotated

import typer
from typer.core import TyperCommand

from ..config import DEFAULTS
from ..errors import GradcheckError
from .cases import print_problems
from .common import (
    EngineOption,
    Isolate,
    OpsFiles,
    Paths,
    Reference,
    app,
    boundary,
    echo_err,
    engine_factory,
    load_ops,
    run_settings,
)
from .reports import Format, Report


class Diagnose(str, enum.Enum):
    first = "first"
    all = "all"


class RunCommand(TyperCommand):
    """`run`'s parser: `--diagnose` was a flag before it took a value, so a bare
    `--diagnose` (not followed by first or all) still means the default, first."""

    def parse_args(self, ctx, args: list[str]) -> list[str]:
        return super().parse_args(ctx, bare_diagnose(args))


def bare_diagnose(args: list[str]) -> list[str]:
    """`args` with a bare `--diagnose` spelled `--diagnose=first` (before any `--`)."""
    out = list(args)
    for i, arg in enumerate(out):
        if arg == "--":
            break
        if arg == "--diagnose" and (i + 1 == len(out) or out[i + 1] not in Diagnose.__members__):
            out[i] = f"--diagnose={Diagnose.first.value}"
    return out


@app.command(cls=RunCommand)
@boundary
def run(
    ctx: typer.Context,
    paths: Paths = None,
    ops_files: OpsFiles = None,
    engine: EngineOption = None,
    keyword: Annotated[
        str | None,
        typer.Option("-k", help="Only cases whose name or tag matches (not/and/or)."),
    ] = None,
    fail_fast: Annotated[
        bool, typer.Option("-x", "--fail-fast", help="Stop at the first failure.")
    ] = False,
    verbose: Annotated[
        bool, typer.Option("-v", "--verbose", help="Arrays and passing inputs too.")
    ] = False,
    quiet: Annotated[
        bool, typer.Option("-q", "--quiet", help="Failures and the summary only.")
    ] = False,
    format: Annotated[
        Format | None, typer.Option("--format", "-f", help="Report format [default: rich].")
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Write the report here (atomically): in --format's file format, else the "
            "suffix's (.html, .json, .xml for JUnit, other: plain text). The terminal keeps "
            "the rich report.",
        ),
    ] = None,
    strict: Annotated[
        bool, typer.Option(help="Unsupported cases fail instead of being skipped.")
    ] = False,
    rtol: Annotated[float | None, typer.Option(help="Override every case's rtol.", min=0)] = None,
    atol: Annotated[float | None, typer.Option(help="Override every case's atol.", min=0)] = None,
    max_elements: Annotated[
        int | None,
        typer.Option(
            help="Refuse inputs larger than this.", min=1, show_default=str(DEFAULTS.max_elements)
        ),
    ] = None,
    diagnose: Annotated[
        Diagnose,
        typer.Option(
            "--diagnose",
            help="Explain failures: first (a case that a fingerprint found on an earlier case "
            "reproduces is not probed again) or all (every failing case in full). A bare "
            "--diagnose is first.",
        ),
    ] = Diagnose.first,
    no_diagnose: Annotated[
        bool, typer.Option("--no-diagnose", help="Only compare: no diagnosis at all.")
    ] = False,
    durations: Annotated[
        int | None,
        typer.Option(
            help="List the N slowest cases after the summary (0: every case).", metavar="N", min=0
        ),
    ] = None,
    stale_check_limit: Annotated[
        int | None,
        typer.Option(
            help="Ask the engine for the gradients a second time (the stale-gradients check) "
            "only in cases with at most N input elements (0: every case).",
            metavar="N",
            min=0,
            show_default=str(DEFAULTS.stale_check_limit),
        ),
    ] = None,
    cache: Annotated[
        bool | None,
        typer.Option(
            "--cache/--no-cache",
            help="Reuse TensorFlow's results from earlier runs (--no-cache: recompute).",
            show_default="cache",
        ),
    ] = None,
    cache_dir: Annotated[
        Path | None,
        typer.Option(
            help="Where TensorFlow's results are kept between runs.",
            show_default=str(DEFAULTS.cache_dir),
        ),
    ] = None,
    reference: Annotated[
        Reference | None,
        typer.Option(
            help="What the gradients are checked against: TensorFlow, finite differences "
            "(numeric, no TensorFlow needed), or both (and where the two disagree); a case's "
            "own `reference:` wins.",
            show_default=DEFAULTS.reference,
        ),
    ] = None,
    require_cache: Annotated[
        bool,
        typer.Option(
            help="A reference missing from the cache (or from its lock, when there is one) "
            "is an error (exit 1) instead of being computed: for a CI that commits the "
            "cache and does not install TensorFlow. Nothing in the cache is changed."
        ),
    ] = False,
    isolate: Annotated[
        Isolate | None,
        typer.Option(
            help="Where the engine runs: process (worker processes; a crash, hang or exit "
            "is that case's error) or none (this process: for pdb) "
            "[default: process; none for the builtin engine].",
            show_default=False,
        ),
    ] = None,
    timeout: Annotated[
        float | None,
        typer.Option(
            help="Seconds the engine may take on one case (and again on its diagnosis) in "
            "a worker before the case is an error; a case's `timeout:` wins.",
            min=0.001,
            metavar="S",
            show_default=str(DEFAULTS.timeout),
        ),
    ] = None,
    threads: Annotated[
        str | None,
        typer.Option(
            help="The threads of the engine's worker and TensorFlow while both run: auto "
            "(the cores split between them), REF:ENGINE (e.g. 1:3) or off (neither "
            "limited). An engine running alone is never limited; --verbose reports it.",
            metavar="auto|off|REF:ENGINE",
            show_default=DEFAULTS.threads,
        ),
    ] = None,
    modes: Annotated[
        str,
        typer.Option(
            help="What cases that say no `modes:` check: rev (gradients, reverse mode), fwd "
            "(JVPs, forward mode), or rev,fwd (both, and each against the other).",
            metavar="MODES",
        ),
    ] = "rev",
    order: Annotated[
        int,
        typer.Option(
            help="For cases that say no `order:`: 2 also checks the gradient of sum(grad * v) "
            "(second order, a Hessian-vector product).",
            min=1,
            max=2,
        ),
    ] = 1,
    repro: Annotated[
        Path | None,
        typer.Option(
            help="For each failing node the diagnosis names, write a small Python script "
            "here (and its arrays, .npz) that calls the engine on that one op and prints "
            "expected vs got.",
            metavar="DIR",
        ),
    ] = None,
    shard: Annotated[
        str | None,
        typer.Option(
            "--shard",
            help="Run only shard K of N (1 <= K <= N): the cases split over N jobs, "
            "disjoint and complete, balanced by the durations the reference cache keeps; "
            "`gradcheck merge` makes their JSON reports one.",
            metavar="K/N",
        ),
    ] = None,
    watch: Annotated[
        bool,
        typer.Option(
            "--watch",
            help="Check, then check again on every save: a case file's cases when it is "
            "saved, every case (the engine restarted) when the engine's files or an --ops "
            "file are; TensorFlow and the engine stay warm. q or Ctrl-C quits.",
        ),
    ] = False,
) -> None:
    """Check every case against TensorFlow (or finite differences).

    Options not given come from [tool.gradcheck] in the nearest pyproject.toml, or from
    gradcheck.toml (see the README), else from the defaults shown."""
    from ..cases import collect
    from ..cases.model import Case
    from ..checking.modes import run_defaults
    from ..runner import prefetch_tensorflow
    from ..runner.shards import parse_shard, read_durations
    from ..runner.shards import shard as shard_of
    from ..util.interrupts import Interrupted, handled

    given = dict(
        paths=paths, engine=engine, ops=ops_files, rtol=rtol, atol=atol, cache=cache,
        cache_dir=cache_dir, reference=reference.value if reference else None,
        stale_check_limit=stale_check_limit, timeout=timeout, max_elements=max_elements,
        threads=threads,
    )  # fmt: skip
    settings = run_settings(given)
    if require_cache and not settings.cache:
        off = settings.source("cache")
        off = "drop --no-cache" if off.startswith("--") else f"{off} turns it off (cache = false)"
        raise GradcheckError(f"--require-cache needs the cache; {off}")
    engine = settings.engine
    part = parse_shard(shard) if shard is not None else None
    chosen_modes, order = run_defaults(modes, order)
    with handled():
        options = settings.run_options(
            engine,
            read_only=require_cache,
            strict=strict,
            fail_fast=fail_fast,
            diagnose=False if no_diagnose else diagnose.value,
            require_cache=require_cache,
            isolate=isolate.value if isolate else None,
            modes=chosen_modes,
            order=order,
        )
        try:
            load_ops(list(settings.ops))
            one_case = ctx.obj  # `check`'s one case, instead of case files
            gather = one_case.collect if one_case is not None else collect

            def cases_in(files: list[Path] | None):
                chosen = paths if one_case is not None else files or list(settings.paths)
                return gather(chosen, keyword=keyword, max_elements=settings.max_elements,
                              rtol=settings.rtol, atol=settings.atol)  # fmt: skip

            if watch:
                watched = [] if one_case is not None else list(settings.paths)
                raise typer.Exit(_watch(cases_in, watched, settings, options, format, output))
            collected = cases_in(None)
            if part is not None:
                timed = read_durations(options.cache.directory) if options.cache else {}
                collected.items = shard_of(collected.items, *part, timed)
                options = dataclasses.replace(options, record_durations=False)
            print_problems(collected.items)  # case-file problems on stderr, before anything runs
            # Once the cases are known (loading them is quick): only if one needs it, and
            # before the engine's import in this process, which it overlaps.
            prefetch_tensorflow(options, [i for i in collected.items if isinstance(i, Case)])
            # What an engine's module prints on import is not the report's: stdout may
            # carry JSON. (Its cases' output is captured with each case.)
            with contextlib.redirect_stdout(sys.stderr):
                engine_arg = engine if options.isolate == "process" else engine_factory(settings)
        except Interrupted as stop:
            echo_err(f"gradcheck: interrupted by {stop.signal} before any case ran")
            raise typer.Exit(_signal_exit(stop.signal)) from None
        output = (
            Path(os.path.abspath(output)) if output is not None else None
        )  # an engine may chdir
        report = Report(
            format, output, verbose=verbose, quiet=quiet, durations=durations,
            repro=(repro, engine) if repro is not None else None,
        )  # fmt: skip
        report.run(collected, engine_arg, options)


def _watch(cases_in, watched: list[Path], settings, options, format, output) -> int:
    """`--watch`: its rounds, on this terminal; the exit code."""
    from ..engines.naming import is_file_spec
    from .watch import Watch, watch

    if output is not None or format not in (None, Format.rich):
        raise GradcheckError("--watch prints its rounds here: drop --output and --format")
    target = settings.engine.partition(":")[0]
    engine_file = Path(target) if is_file_spec(target) else None
    if engine_file is not None and options.isolate != "process":
        raise GradcheckError(
            "--watch runs a file's engine in a worker, restarted when the file is saved: "
            "drop --isolate none"
        )
    session = Watch(
        cases_in, settings.engine, options, cases=watched, engine_file=engine_file,
        ops=list(settings.ops), echo=lambda line: typer.echo(line),
    )  # fmt: skip
    return watch(session)


def _signal_exit(signal_name: str) -> int:
    from ..results import SIGNAL_EXIT

    return SIGNAL_EXIT.get(signal_name, 1)
