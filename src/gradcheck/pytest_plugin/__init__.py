"""gradcheck as a pytest plugin: every case of a case file is a test item.

Opt-in, so that it never takes over YAML that is not a case file::

    pytest --gradcheck cases/                       # the YAML under cases/
    pytest --gradcheck cases/seed.yaml::seed_batched_matmul_chain
    pytest --gradcheck cases/ --gradcheck-engine examples/seed_engine.py -n 2

or, in the ini file (``[tool.pytest.ini_options]`` in pyproject.toml)::

    gradcheck_paths = ["cases"]                     # `pytest` alone now runs them too
    gradcheck_engine = "mypkg.autodiff:Engine"      # default: builtin
    gradcheck_cache_dir = "refs"                    # default: .gradcheck_cache
    gradcheck_ops = ["my_ops.py"]                   # user-defined ops (--gradcheck-ops)
    gradcheck_reference = "numeric"                 # tensorflow (default), numeric or both

Settings come from pytest's options (paths relative to where pytest started), else the
ini options (relative to the ini file), else gradcheck's config file (``[tool.gradcheck]``
or ``gradcheck.toml``, relative to it: see `gradcheck.config`), else the defaults
`gradcheck run` has: the same `config.Settings`. The reference cache is on unless
``--gradcheck-no-cache`` (or ``cache = false`` in the config file).

Which YAML files are case files (``*.yaml``/``*.yml``, hidden files left out):

* those under a ``gradcheck_paths`` entry, whenever the ini option is set;
* with ``--gradcheck``, also those under the paths given on the command line; with no
  paths given and no ``gradcheck_paths``, those under the config file's ``paths``, else
  ``<rootdir>/cases`` (the folder ``gradcheck run`` reads by default).

When pytest runs without paths on its command line (so ``testpaths`` apply), the case
folders are collected as well as ``testpaths``. Without ``--gradcheck`` and without
``gradcheck_paths`` the plugin collects nothing: a project's own ``pytest`` run is
unchanged. ``-p no:gradcheck`` unloads it altogether.

Each case is an item ``path/file.yaml::case_name``; its tags are ``-k`` keywords. A
failing case fails with gradcheck's plain-text report, its best explanation (top hint
and fix) first; an engine error fails the same way; a case the engine does not support
is skipped with the reason (``--gradcheck-strict``: it fails); a session whose every
case was skipped says, after its summary, that nothing was checked. The stale-gradients
check has ``gradcheck run``'s size limit (``--gradcheck-stale-check-limit N``). As with
``gradcheck run``, an engine other than the builtin one runs in a worker process kept
for the session (``--gradcheck-isolate process|none``), so its crash, hang or exit
fails that item only; ``--gradcheck-timeout S`` bounds each case (default 60 s).

``--gradcheck-shard K/N`` keeps shard K of N of the cases, split as ``gradcheck run
--shard`` splits them (after ``-k``, by the durations the reference cache keeps; the
fuzz item goes to shard 1); the session's other tests run in every shard.

``--gradcheck-fuzz N`` (or ``gradcheck_fuzz = N`` in the ini file) adds one more item,
``gradcheck-fuzz``: ``gradcheck fuzz`` of the same engine over N examples (seed 0, or
``--gradcheck-fuzz-seed``; ops from ``gradcheck_fuzz_ops``, default every op the engine
has). It fails with each bug found, its diagnosis and its smallest case as a case file to
paste into the case folder (``--gradcheck-fuzz-out DIR`` also writes them there). It
needs no case file, keeps no reference cache (as ``gradcheck fuzz``), and ``-k fuzz``
selects or deselects it like any item.

A case file with any problem is a collection error listing every problem as
``file:line: message``, as a Python test module with a syntax error is: pytest stops
before running anything unless ``--continue-on-collection-errors`` is given. Collection
is deterministic, so pytest-xdist workers agree on the items.

Nothing heavy is imported until it is needed: the case loader (NumPy) when a case file
is collected, the engine and TensorFlow when the first item runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .items import FUZZ_ITEM, CaseFile, CaseItem, FuzzItem
from .options import add_options
from .state import STATE, State, configured

SUFFIXES = (".yaml", ".yml")


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    config.stash[STATE] = state = configured(config)
    if state.shard is not None:
        config.pluginmanager.register(Sharding(state), "gradcheck-shard")
    elif state.roots and not hasattr(config, "workerinput"):  # xdist's controller, or no xdist
        config.pluginmanager.register(Durations(state), "gradcheck-durations")


class Durations:
    """Each case's duration kept beside the reference cache, as `gradcheck run` keeps
    them, so that a later `--gradcheck-shard` (or `run --shard`) balances by them. Not
    by a shard, so that every shard of one CI run reads the same."""

    def __init__(self, state: State) -> None:
        self.state = state
        self.timed: dict[str, float] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" and _is_case(report.nodeid):
            self.timed[report.nodeid] = report.duration

    def pytest_sessionfinish(self) -> None:
        if not self.timed:  # nothing ran (--collect-only): nothing to import either
            return
        from ..runner.shards import record_durations

        cache = self.state.options.cache
        if cache is not None and cache.writable:
            record_durations(cache.directory, self.timed)


class Sharding:
    """`--gradcheck-shard K/N`: after pytest's own selection (-k, -m), as `run --shard`
    splits what -k left. Every xdist worker computes the same split, as collection and
    the durations it reads are the same for each."""

    def __init__(self, state: State) -> None:
        self.state = state

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        from ..runner.shards import read_durations, shard

        k, n = self.state.shard
        cases = [item.case for item in items if isinstance(item, CaseItem)]
        # From the settings, not the run's options: collection imports nothing heavy.
        settings = self.state.settings
        timed = read_durations(settings.cache_dir) if settings.cache else {}
        kept = {id(case) for case in shard(cases, k, n, timed)}

        def leaves(item: pytest.Item) -> bool:
            if isinstance(item, CaseItem):
                return id(item.case) not in kept
            return isinstance(item, FuzzItem) and k != 1  # one item: shard 1 runs it

        gone = [item for item in items if leaves(item)]
        if gone:
            items[:] = [item for item in items if not leaves(item)]
            config.hook.pytest_deselected(items=gone)


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(STATE, None)
    if state is not None:
        state.close()  # the session's worker processes


def pytest_report_header(config: pytest.Config) -> str | None:
    from ..engines.naming import config_label, engine_label

    state = config.stash.get(STATE, None)
    if state is None or not (state.roots or state.fuzz_examples):
        return None
    where = ", ".join(_display(root, config.rootpath) for root in state.roots)
    files = f", case files under {where}" if state.roots else ""
    fuzz = f", fuzz {state.fuzz_examples} examples" if state.fuzz_examples else ""
    engine = engine_label(state.engine_spec, state.settings.source("engine"))
    return f"gradcheck: {engine}{files}{fuzz}, {config_label(state.settings.config)}"


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """As `gradcheck run` (SPEC §5): a session whose every case was skipped (the engine
    lacks their ops) passes, and says that nothing was checked. (pytest itself exits 5
    when nothing was collected or selected, and 4 for a malformed -k.)"""
    if terminalreporter.config.stash.get(STATE, None) is None:
        return
    cases = [
        report
        for reports in terminalreporter.stats.values()
        for report in reports
        if isinstance(report, pytest.TestReport) and _is_case(report.nodeid)
    ]
    ran = [r for r in cases if r.when == "call" or r.skipped]
    if ran and all(r.skipped for r in ran):
        every = "the case was" if len(ran) == 1 else f"all {len(ran)} cases were"
        terminalreporter.write_line(f"gradcheck: nothing was checked: {every} skipped", yellow=True)


def _is_case(nodeid: str) -> bool:
    path = nodeid.split("::")[0]
    return path.endswith(SUFFIXES) and "::" in nodeid


@pytest.hookimpl(tryfirst=True)  # before pytest's own -k/-m selection, which then applies
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    state = config.stash.get(STATE, None)
    if state is not None and state.fuzz_examples > 0:
        items.append(FuzzItem.from_parent(session, name=FUZZ_ITEM, nodeid=FUZZ_ITEM))


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> CaseFile | None:
    state = parent.config.stash.get(STATE, None)
    if (
        state is None
        or not state.roots
        or file_path.suffix not in SUFFIXES
        or file_path.name.startswith(".")
        or not state.covers(file_path)
    ):
        return None
    return CaseFile.from_parent(parent, path=file_path)


def _display(path: Path, rootpath: Path) -> str:
    try:
        return path.relative_to(rootpath).as_posix() or "."
    except ValueError:
        return str(path)
