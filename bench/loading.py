"""Loading case files: linear in the expression's length, bounded whatever the file holds.

Prints the time to load (read, parse, shape-check) a case whose expression is 20,000
``h{i+1} = h{i} * 1.0`` bindings (target: under 2 s; it never finished before the
parser stopped re-splitting its source for every node), to refuse a 500-byte alias
bomb (minutes before the bounded reader), and to load the shipped suite.

    python bench/loading.py
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from gradcheck.cases import discover, load_file

BINDINGS = 20_000
TARGET_S = 2.0


def chain(folder: Path) -> Path:
    lines = [f"      h{i + 1} = h{i} * 1.0" for i in range(BINDINGS)]
    text = "cases:\n  - name: chain\n    inputs: {x: [1.0]}\n    expr: |\n      h0 = x * 1.0\n"
    path = folder / "chain.yaml"
    path.write_text(text + "\n".join(lines) + f"\n      h{BINDINGS}\n")
    return path


def bomb(folder: Path) -> Path:
    levels = [f"  a0: &a0 [{', '.join(['lol'] * 9)}]"]
    levels += [f"  a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    path = folder / "bomb.yaml"
    path.write_text("cases:\n  - name: bomb\n    expr: x\n    inputs: {x: [1.0]}\n    junk:\n"
                    + "\n".join("  " + line for line in levels) + "\n")  # fmt: skip
    return path


def timed(fn) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(3):
        started = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - started)
    return best, result


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        chain_s, (case,) = timed(lambda: load_file(chain(folder)))
        assert len(case.expression.nodes) == 2 * BINDINGS + 3
        size = bomb(folder).stat().st_size
        bomb_s, (refused,) = timed(lambda: load_file(folder / "bomb.yaml"))
        assert "expands to more than" in refused.message, refused
        files = discover(["cases"])
        suite_s, _ = timed(lambda: [load_file(f) for f in files])
    print(f"{BINDINGS:,} bindings: {chain_s:.2f} s (target < {TARGET_S:.0f} s)")
    print(f"alias bomb of {size} bytes refused in "
          f"{bomb_s * 1e3:.1f} ms")  # fmt: skip
    print(f"the shipped suite ({len(files)} files): {suite_s * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
