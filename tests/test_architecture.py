"""The house rules of src/gradcheck: imports point down the layers docs/architecture.md
draws (no cycles, counting imports inside functions), and no module grows past what a
reader holds in mind."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "gradcheck"
MAX_LINES = 400


def module_name(path: Path) -> str:
    parts = ["gradcheck", *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imported(path: Path) -> set[str]:
    """The gradcheck modules `path` imports, anywhere in it but under `if TYPE_CHECKING:`;
    `from package import name` names the submodule when there is one, else the package."""
    current = module_name(path)
    package = current if path.name == "__init__.py" else current.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add(sub if sub in MODULES else target)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    edges = set()
    for name in found:
        while name and name not in MODULES:
            name = name.rpartition(".")[0]
        if name and name != current:
            edges.add(name)
    return edges


GRAPH = {name: imported(path) for name, path in MODULES.items()}


def layers() -> list[list[str]]:
    """The packages of each layer, top first, from docs/architecture.md's table."""
    doc = (ROOT / "docs" / "architecture.md").read_text()
    table = doc.split("## Layers", 1)[1].split("\n## ", 1)[0]
    rows = [line.split(" | ") for line in table.splitlines() if line.startswith("| ")][1:]
    return [
        [
            name if name == "gradcheck" else f"gradcheck.{name}"
            for name in re.findall(r"`(\w[\w.]*)`", row[1])
        ]
        for row in rows
    ]


def layer_of(module: str, stack: list[list[str]]) -> int:
    """The layer of the longest package in the table that holds `module`."""
    best: tuple[int, int] | None = None
    for index, packages in enumerate(stack):
        for package in packages:
            holds = module == package or (
                package != "gradcheck" and module.startswith(package + ".")
            )
            if holds and (best is None or len(package) > best[1]):
                best = index, len(package)
    assert best is not None, f"{module} is in no layer of docs/architecture.md"
    return best[0]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycles():
    assert cycles(GRAPH) == []


def test_the_cycle_finder_finds_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


def upward(graph: dict[str, set[str]], stack: list[list[str]]) -> list[str]:
    return [
        f"{module} ({layer_of(module, stack)}) imports {target} ({layer_of(target, stack)})"
        for module, targets in sorted(graph.items())
        for target in sorted(targets)
        if layer_of(target, stack) < layer_of(module, stack)
    ]


def test_every_import_points_down_the_layers():
    stack = layers()
    assert len(stack) >= 10, "docs/architecture.md's layer table was not found"
    found = upward(GRAPH, stack)
    assert not found, "imports that point up the layers:\n" + "\n".join(found)


def test_an_import_up_the_layers_is_found():
    stack = [["gradcheck.cli"], ["gradcheck.runner"], ["gradcheck.runner.workers"]]
    graph = {"gradcheck.runner.workers.pool": {"gradcheck.runner"}, "gradcheck.cli": set()}
    assert upward(graph, stack) == [
        "gradcheck.runner.workers.pool (2) imports gradcheck.runner (1)"
    ]


def test_every_package_is_in_a_layer():
    stack = layers()
    for module in MODULES:
        layer_of(module, stack)  # asserts


def test_no_module_is_past_the_size_a_reader_holds_in_mind():
    long = {
        str(path.relative_to(ROOT)): lines
        for path in PACKAGE.rglob("*.py")
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, f"modules past {MAX_LINES} lines (split them along their seams): {long}"
