"""The plugin's options and ini options, and the session's settings they resolve to:
pytest's options (relative to where pytest was started), else the ini file's (relative
to it), else gradcheck's config file, else the defaults (`config.Settings`, as `gradcheck
run` has them)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ..errors import GradcheckError
from ..util.limits import TIMEOUT

if TYPE_CHECKING:
    from ..config import Settings


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("gradcheck", "gradcheck: autodiff gradients against TensorFlow")
    group.addoption(
        "--gradcheck",
        action="store_true",
        default=False,
        help="collect gradcheck case files (*.yaml/*.yml) under the given paths "
        "(default: gradcheck_paths, else cases/), one test per case.",
    )
    group.addoption(
        "--gradcheck-engine",
        metavar="SPEC",
        default=None,
        help="engine to check: builtin, torch, jax, autograd, tensorflow, "
        "path/file.py[:Class] or pkg.module[:Class] "
        "(default: the gradcheck_engine ini option, else builtin).",
    )
    group.addoption(
        "--gradcheck-strict",
        action="store_true",
        default=False,
        help="a case the engine does not support fails instead of being skipped.",
    )
    group.addoption(
        "--gradcheck-stale-check-limit",
        metavar="N",
        type=int,
        default=None,
        help="ask the engine twice (the stale-gradients check) only in cases with at most "
        "N input elements (as gradcheck run --stale-check-limit; 0: every case; "
        "default: 1,000,000).",
    )
    group.addoption(
        "--gradcheck-ops",
        metavar="FILE",
        action="append",
        default=[],
        help="a Python file declaring user-defined ops (as gradcheck run --ops); repeatable.",
    )
    group.addoption(
        "--gradcheck-reference",
        choices=("tensorflow", "numeric", "both"),
        default=None,
        help="what gradients are checked against (as gradcheck run --reference; default: "
        "the gradcheck_reference ini option, else tensorflow).",
    )
    group.addoption(
        "--gradcheck-isolate",
        choices=("process", "none"),
        default=None,
        help="where the engine runs: process (a worker kept for the session) or none "
        "(pytest's own process, for pdb); default: process, none for the builtin engine.",
    )
    group.addoption(
        "--gradcheck-timeout",
        metavar="S",
        type=float,
        default=None,
        help=f"seconds the engine may take on one case in its worker (default: {TIMEOUT:g}).",
    )
    group.addoption(
        "--gradcheck-cache-dir",
        metavar="DIR",
        default=None,
        help="reuse TensorFlow's reference results kept in DIR between runs "
        "(as gradcheck run --cache-dir; default: the gradcheck_cache_dir ini option, "
        "else .gradcheck_cache in the rootdir).",
    )
    group.addoption(
        "--gradcheck-no-cache",
        action="store_true",
        default=False,
        help="no reference cache: compute every reference (as gradcheck run --no-cache).",
    )
    group.addoption(
        "--gradcheck-shard",
        metavar="K/N",
        default=None,
        help="run only shard K of N (1 <= K <= N) of the cases, split as gradcheck run "
        "--shard splits them (balanced by the durations the reference cache keeps); "
        "the session's other tests run in every shard.",
    )
    group.addoption(
        "--gradcheck-fuzz",
        metavar="N",
        type=int,
        default=None,
        help="add a gradcheck-fuzz item: fuzz the engine over N generated examples "
        "(default: the gradcheck_fuzz ini option, else no fuzzing).",
    )
    group.addoption(
        "--gradcheck-fuzz-seed",
        metavar="SEED",
        type=int,
        default=0,
        help="seed of the gradcheck-fuzz item (default: 0, the same examples every run).",
    )
    group.addoption(
        "--gradcheck-fuzz-out",
        metavar="DIR",
        default=None,
        help="write the case file of each bug the gradcheck-fuzz item finds into DIR.",
    )
    parser.addini(
        "gradcheck_fuzz",
        type="string",
        default="0",
        help="examples for the gradcheck-fuzz item (0: no such item).",
    )
    parser.addini(
        "gradcheck_fuzz_ops",
        type="args",
        default=[],
        help="ops the gradcheck-fuzz item generates cases over (default: every op the engine has).",
    )
    parser.addini(
        "gradcheck_paths",
        type="paths",
        default=[],
        help="gradcheck case files or folders; setting it turns the gradcheck plugin on.",
    )
    parser.addini(
        "gradcheck_engine",
        type="string",
        default="",
        help="engine the gradcheck plugin checks (--gradcheck-engine overrides it).",
    )
    parser.addini(
        "gradcheck_ops",
        type="paths",
        default=[],
        help="Python files declaring user-defined ops, loaded before case files are read.",
    )
    parser.addini(
        "gradcheck_reference",
        type="string",
        default="",
        help="tensorflow, numeric or both (--gradcheck-reference overrides it).",
    )
    parser.addini(
        "gradcheck_cache_dir",
        type="string",
        default="",
        help="folder for gradcheck's reference cache, relative to the ini file.",
    )


def settings_of(config: pytest.Config, ini_paths: list[Path]) -> Settings:
    """The session's settings: pytest's options (relative to where pytest was started),
    else the ini file's (relative to it), else the gradcheck config file's, else the
    defaults (paths in the config file's folder, else in the rootdir)."""
    from ..config import Layer, config_layer, defaults_at, resolve

    here = config.invocation_params.dir
    options = {key: config.getoption(f"gradcheck_{key}") for key in _OPTIONS}
    options["ops"] = options["ops"] or None
    options["cache"] = False if config.getoption("gradcheck_no_cache") else None
    ini = {key: config.getini(f"gradcheck_{key}") or None for key in _INI}
    ini["paths"] = ini_paths or None
    inipath = config.inipath
    ini_name = inipath.name if inipath else "the ini file"
    found = config_layer(here)
    try:
        return resolve(
            Layer(options, lambda key: f"--gradcheck-{key.replace('_', '-')}", here),
            Layer(ini, lambda key: f"gradcheck_{key} in {ini_name}", inipath and inipath.parent),
            found,
            defaults_at(found.base if found else config.rootpath),
        )
    except GradcheckError as e:
        raise pytest.UsageError(f"gradcheck: {e}") from None


# The settings pytest's options and ini file can set (pytest's own names, prefixed).
_OPTIONS = ("engine", "stale_check_limit", "ops", "reference", "timeout", "cache_dir")
_INI = ("engine", "ops", "reference", "cache_dir")
