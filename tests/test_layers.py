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
    ("configuration", {"settings"}, False),  # validates names against the registries below
    ("pipelines", {"recall", "ingest"}, False),
    ("graph", {"graph"}, False),
    ("linking", {"linking"}, False),
    ("models", {"models"}, False),
    ("store", {"store"}, False),
    ("db", {"db"}, False),
    ("contract", {"contract"}, False),  # field limits shared by REST, MCP and the mirror
    ("foundation", {"errors", "logging", "metrics", "__init__"}, True),
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
