"""Import layering: no module under knowmind/ imports from a layer above its own.

The package reads as the pipeline: the doors (REST, MCP) call services, services call the
recall/ingest pipelines, which use the graph and entity linking, which read and write through
store/ (all SQL), which runs on db/. A lower layer never reaches up; within the pipeline layer
recall and ingest do not import each other. Type-only imports count too.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "knowmind"

# Top first. A module may import its own package, any lower layer and, in a layer marked
# open, the other packages of that layer.
LAYERS: list[tuple[str, set[str], bool]] = [
    ("entry points", {"__main__", "cli", "cli_citus", "cli_tenant", "app"}, True),
    ("client", {"client"}, False),  # the Python SDK: httpx and msgspec, nothing of the server
    ("doors", {"api", "mcp"}, True),
    ("composition", {"runtime"}, False),
    ("services", {"services"}, False),
    ("answers", {"answer"}, False),  # answer methods over recall and a language model
    ("workers", {"workers"}, False),  # the health service reports on the mirror drainer
    ("pipelines", {"recall", "ingest"}, False),
    ("graph", {"graph"}, False),
    ("linking", {"linking"}, False),
    ("models", {"models"}, False),
    ("store", {"store"}, False),
    ("db", {"db"}, False),
    ("contract", {"contract"}, False),  # field limits and the response records every door shares
    # settings: a leaf (registry names are checked where the registries are built, in runtime/)
    ("foundation", {"errors", "logging", "metrics", "settings", "__init__"}, True),
]

# Imports that break the rule, (file, imported module) → why; none today.
KNOWN_EXCEPTIONS: dict[tuple[str, str], str] = {}


def _rank(package: str) -> tuple[int, str, bool]:
    for rank, (name, members, open_) in enumerate(LAYERS):
        if package in members:
            return rank, name, open_
    raise AssertionError(f"knowmind.{package} is in no layer: add it to LAYERS in {__file__}")


def _package_of(module: str) -> str:
    """``knowmind.recall.graph`` → ``recall``; ``knowmind`` → ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _imports(path: Path, package: Path) -> list[tuple[int, str]]:
    """(line, imported knowmind module) for every import in the file, type-only ones too."""
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("knowmind")]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "knowmind":  # a submodule, or a name of knowmind/__init__.py
                for alias in node.names:
                    is_module = (package / alias.name).is_dir() or (
                        package / f"{alias.name}.py"
                    ).exists()
                    found.append(
                        (node.lineno, f"knowmind.{alias.name}" if is_module else "knowmind")
                    )
            elif node.module.startswith("knowmind."):
                found.append((node.lineno, node.module))
    return found


def layer_violations(package: Path = PACKAGE) -> list[str]:
    violations = []
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package)
        source = relative.parts[0].removesuffix(".py") if len(relative.parts) > 0 else "__init__"
        rank, layer, open_ = _rank(source)
        for line, target_module in _imports(path, package):
            target = _package_of(target_module)
            target_rank, target_layer, _ = _rank(target)
            allowed = (
                target == source
                or target_rank > rank
                or (target_rank == rank and open_)
                or (f"knowmind/{relative}", target_module) in KNOWN_EXCEPTIONS
            )
            if not allowed:
                violations.append(
                    f"knowmind/{relative}:{line} ({layer}) imports {target_module} ({target_layer})"
                )
    return violations


def test_no_module_imports_from_a_layer_above_it():
    assert layer_violations() == []


def test_settings_is_a_leaf():
    """Settings import nothing of knowmind: any module may read them without pulling in a
    registry (their names are checked in ``knowmind.runtime.names``)."""
    assert _imports(PACKAGE / "settings.py", PACKAGE) == []


def test_the_check_catches_an_upward_import(tmp_path):
    """The rule itself can fail: upward, type-only and sideways imports are all reported."""
    fake = tmp_path / "knowmind"
    for package in ("store", "graph", "recall"):
        (fake / package).mkdir(parents=True)
    (fake / "store" / "bad.py").write_text("from knowmind.services.memories import MemoryService\n")
    (fake / "graph" / "bad.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from knowmind.ingest import x\n"
    )
    (fake / "recall" / "bad.py").write_text("import knowmind.ingest.extract\n")
    (fake / "recall" / "good.py").write_text("from knowmind.store import search\n")
    assert layer_violations(fake) == [
        "knowmind/graph/bad.py:3 (graph) imports knowmind.ingest (pipelines)",
        "knowmind/recall/bad.py:1 (pipelines) imports knowmind.ingest.extract (pipelines)",
        "knowmind/store/bad.py:1 (store) imports knowmind.services.memories (services)",
    ]


# -- import cycles ------------------------------------------------------------------------------

ROOT = PACKAGE.parent
#: The packages checked for cycles: the server and the benchmark harness.
CYCLE_ROOTS = ("knowmind", "benchmark")
#: Cycles that stand for now, each with why; none other may appear.
KNOWN_CYCLES: dict[tuple[str, ...], str] = {
    ("knowmind.cli", "knowmind.cli_tenant"): "the knowmind/cli/ package under way replaces both",
}


def _module_files(root: Path, packages: tuple[str, ...]) -> dict[str, Path]:
    """Dotted name -> file of every module under ``packages`` (``a/__init__.py`` is ``a``)."""
    found = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _targets(node: ast.Import | ast.ImportFrom, modules: dict[str, Path]) -> list[str]:
    """The modules of ``modules`` one import statement loads (a name imported from a package is
    its submodule when there is one, else the package)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name in modules]
    if node.level or node.module is None or node.module not in modules:
        return []
    submodules = [f"{node.module}.{a.name}" for a in node.names]
    named = [name for name in submodules if name in modules]
    return named if len(named) == len(submodules) else [*named, node.module]


def import_graph(root: Path = ROOT, packages: tuple[str, ...] = CYCLE_ROOTS) -> dict[str, set[str]]:
    """Module -> the modules it imports: at the top, inside functions and for type checking
    alike (a lazy import only hides a cycle)."""
    modules = _module_files(root, packages)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import | ast.ImportFrom):
                graph[name].update(t for t in _targets(node, modules) if t != name)
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in sorted(graph[module]):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(cycles)


def test_no_import_cycles():
    cycles = import_cycles(import_graph())
    assert [c for c in cycles if tuple(c) not in KNOWN_CYCLES] == []


def test_the_cycle_check_finds_a_lazy_cycle(tmp_path):
    """A cycle closed by an import inside a function, or through a package, is one too."""
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "a.py").write_text("import pkg.b\n")
    (tmp_path / "pkg" / "b.py").write_text("def f():\n    from pkg.sub import c\n")
    (tmp_path / "pkg" / "sub" / "__init__.py").write_text("from pkg.sub.c import X\n")
    (tmp_path / "pkg" / "sub" / "c.py").write_text("from pkg import a\nX = 1\n")
    (tmp_path / "pkg" / "d.py").write_text("from pkg import a, b\n")
    graph = import_graph(tmp_path, ("pkg",))
    assert graph["pkg.d"] == {"pkg.a", "pkg.b"}
    assert import_cycles(graph) == [["pkg.a", "pkg.b", "pkg.sub.c"]]


MAX_FUNCTION_LINES = 60


def long_functions(package: Path = PACKAGE, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """Functions (methods included) of more than ``limit`` lines, docstrings counted."""
    found = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > limit:
                    found.append(f"{path.relative_to(package)}:{node.lineno} {node.name} {length}")
    return found


def test_no_function_is_longer_than_sixty_lines(tmp_path: Path) -> None:
    assert long_functions() == []
    fake = tmp_path / "knowmind"
    fake.mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(61))
    (fake / "long.py").write_text(f"def too_long():\n{body}\n")
    assert long_functions(fake) == ["long.py:1 too_long 62"]


def door_imports_of_storage(package: Path = PACKAGE) -> list[str]:
    """Imports of ``knowmind.store`` or ``knowmind.db`` by the doors (REST and MCP): they call
    services, which own every transaction and query."""
    found = []
    for door in ("api", "mcp"):
        for path in sorted((package / door).rglob("*.py")):
            for line, target in _imports(path, package):
                if _package_of(target) in {"store", "db"}:
                    found.append(f"{path.relative_to(package)}:{line} {target}")
    return found


def test_the_doors_reach_storage_only_through_services(tmp_path: Path) -> None:
    assert door_imports_of_storage() == []
    fake = tmp_path / "knowmind"
    for door in ("api", "mcp"):
        (fake / door).mkdir(parents=True)
    (fake / "api" / "c.py").write_text("from knowmind.store.rows import MemoryRow\n")
    (fake / "mcp" / "t.py").write_text("from knowmind.services.memories import MemoryRow\n")
    assert door_imports_of_storage(fake) == ["api/c.py:1 knowmind.store.rows"]
