"""What the HTML report costs: `gradcheck run --output report.html` against `report.json`.

1. The shipped suite (`cases/`) with one planted bug: the builtin engine with one
   catalogue fault (default `broadcast.no-reduce`; the bench prints how many cases it
   fails), run by the command line in-process as a user runs it: `--format html
   --output report.html` against `--format json --output report.json`. Both use one warm
   reference cache, so TensorFlow computes nothing. Best of `large.REPEATS`, in turns.
   Target (issue 14): HTML <= 1.5x JSON. The report functions alone (`to_html`
   against `to_json` on the same results) are printed beside it.
2. A large case: `bench/large.py`'s matmul chain, three (8, 512, 512) inputs, all
   wrong (`backprop.no-upstream`): the size of the page and the time `to_html` takes.

    python bench/html_report.py [--fault NAME]

(Not `bench/html.py`: run as a script, that name would shadow the standard `html`
module for everything the bench imports.)
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from large import best_of_each, write_case
from typer.testing import CliRunner

from gradcheck import __version__
from gradcheck.cases import load_paths
from gradcheck.cli import app
from gradcheck.diagnosis.faults.planted import FAULTS, FaultyEngine
from gradcheck.references.cache import ReferenceCache
from gradcheck.report import to_html, to_json
from gradcheck.runner import RunOptions, run

TARGET = 1.5


def command(*args: str) -> None:
    result = CliRunner().invoke(app, list(args))
    if result.exit_code not in (0, 1):
        raise SystemExit(f"gradcheck {' '.join(args)} exited {result.exit_code}:\n{result.output}")


def suite(fault: str, tmp: Path) -> None:
    engine = tmp / "planted_engine.py"
    engine.write_text(
        "from gradcheck.diagnosis.faults.planted import FAULTS, FaultyEngine\n\n\n"
        "class Planted(FaultyEngine):\n"
        f"    def __init__(self):\n        super().__init__(FAULTS[{fault!r}])\n"
    )
    cache = str(tmp / "cache")
    base = ["run", "cases", "--engine", f"{engine}:Planted", "--cache-dir", cache]
    html = [*base, "--format", "html", "--output", str(tmp / "report.html")]
    json = [*base, "--format", "json", "--output", str(tmp / "report.json")]
    command(*json)  # fills the reference cache; TensorFlow is imported here, once
    as_json, as_html = best_of_each((command, *json), (command, *html))

    result = run(
        load_paths(["cases"]),
        lambda: FaultyEngine(FAULTS[fault]),
        RunOptions(cache=ReferenceCache(cache)),
    )
    to_json_s, to_html_s = best_of_each(
        (lambda: to_json(result, tool_version=__version__),),
        (lambda: to_html(result, tool_version=__version__),),
    )
    size = (tmp / "report.html").stat().st_size
    failing = result.count("failed") + result.count("error")
    print(f"shipped suite, planted {fault}: fails {failing} of {len(result.cases)} cases")
    print(f"  gradcheck run --output report.json  {as_json * 1e3:8.1f} ms")
    print(f"  gradcheck run --output report.html  {as_html * 1e3:8.1f} ms  ({size / 1e3:.0f} kB)")
    print(f"  ratio {as_html / as_json:.2f}x (target <= {TARGET}x)")
    print(
        f"  the report functions alone: to_json {to_json_s * 1e3:.1f} ms, "
        f"to_html {to_html_s * 1e3:.1f} ms"
    )


def large(tmp: Path) -> None:
    path = write_case(tmp, "matmul_chain")
    result = run(
        load_paths([path]),
        lambda: FaultyEngine(FAULTS["backprop.no-upstream"]),
        RunOptions(diagnose=False),
    )
    (seconds,) = best_of_each((lambda: to_html(result, tool_version=__version__),))
    page = to_html(result, tool_version=__version__)
    print(
        f"large case, 3 failing (8, 512, 512) inputs: to_html {seconds:.2f} s, "
        f"{len(page.encode()) / 1e6:.2f} MB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fault", default="broadcast.no-reduce", choices=sorted(FAULTS))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        suite(args.fault, Path(tmp))
        large(Path(tmp))


if __name__ == "__main__":
    main()
