"""``gradcheck cache verify`` and ``gradcheck cache lock``: review a reference cache.

See `lock` for what the lock is and why a committed cache needs one.
"""

from pathlib import Path
from typing import Annotated

import typer

from ..config import DEFAULTS
from .common import EXIT_OK, Paths, boundary, echo_err, load_ops, run_settings

cache_app = typer.Typer(
    no_args_is_help=True,
    rich_markup_mode=None,
    help="Review the reference cache: recompute entries, lock them.",
)
CacheDir = Annotated[
    Path | None,
    typer.Option(help="The reference cache's folder.", show_default=str(DEFAULTS.cache_dir)),
]


@cache_app.command("verify")
@boundary
def cache_verify(
    paths: Paths = None,
    cache_dir: CacheDir = None,
    sample: Annotated[
        int | None,
        typer.Option(help="Recompute only N entries, drawn at random.", metavar="N", min=1),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the sample.")] = 0,
) -> None:
    """Recompute the cached references of the cases with TensorFlow; exit 1 if any differ.

    Also reports entries missing from the cache's lock or changed since they were locked.
    Nothing in the cache is changed.
    """
    from ..references.cache import ReferenceCache
    from ..references.lock import verify
    from ..report.text import plural

    cases, folder = _valid_cases(paths, cache_dir)
    found = verify(cases, ReferenceCache(folder, read_only=True), sample=sample, seed=seed)
    for case, problem in found.differ:
        typer.echo(f"DIFFERS {case.location}::{case.name}: the entry {problem}")
    typer.echo(
        f"{plural(len(found.checked), 'cached reference')} recomputed, {len(found.differ)} differ"
        + (
            f"; {plural(len(found.not_cached), 'case')} with none cached"
            if found.not_cached
            else ""
        )
    )
    raise typer.Exit(1 if found.differ else EXIT_OK)


@cache_app.command("lock")
@boundary
def cache_lock(paths: Paths = None, cache_dir: CacheDir = None) -> None:
    """Write the cache's lock (gradcheck.lock in the cache folder): a text manifest of the
    cases' cached references, which --require-cache then holds the cache to. Commit it
    and review changes to it."""
    from ..references.cache import ReferenceCache
    from ..references.lock import write_lock

    cases, folder = _valid_cases(paths, cache_dir)
    done = write_lock(cases, ReferenceCache(folder, read_only=True))
    for case, why in done.missing:
        echo_err(f"not locked: {case.location}::{case.name} ({why})")
    typer.echo(f"locked {len(done.locked)} references in {done.path}")


def _valid_cases(paths: list[Path] | None, cache_dir: Path | None) -> tuple[list, Path]:
    """The valid cases of `paths` (the problems of the others on stderr), the user-defined
    ops loaded first, and the cache folder: each as given, else as `run` has it."""
    from ..cases import Case, load_paths

    settings = run_settings({"paths": paths, "cache_dir": cache_dir})
    load_ops(list(settings.ops))
    items = load_paths(list(settings.paths))
    for item in items:
        if not isinstance(item, Case):
            echo_err(f"{item.location}: {item.message}")
    return [item for item in items if isinstance(item, Case)], settings.cache_dir
