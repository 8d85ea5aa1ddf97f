"""The README and docs/ name only what exists, show the current state, and have their generated
parts generated: every `make` target, `knowmind` command and `KNOWMIND_*` setting they name is
real, every relative link resolves, every REST operation is described, the settings table is the
code's, the README's benchmark block is rendered from the published summary, and no per-commit
result or commit hash is kept. (The README's walkthrough, SDK snippet and MCP configuration are
run against a real server in tests/test_newcomer.py.)"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
from functools import cache
from pathlib import Path
from types import ModuleType

import pytest

from knowmind.settings import settings_table

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = (README, *sorted(DOCS.glob("*.md")), ROOT / "deploy" / "README.md")
REQUIRED = ("architecture", "recall", "api", "settings", "benchmark", "ranker", "console")

# KNOWMIND_* variables the docs name that are not server settings, and where each is read.
NOT_SETTINGS = {
    "KNOWMIND_URL": "knowmind/cli",  # the SDK-based commands: recall, import
    "KNOWMIND_TOKEN": "knowmind/cli",
    "KNOWMIND_API_URL": "tests/test_knowmind_client.py",  # the official npm client's
    "KNOWMIND_CONSOLE_SCREENSHOTS": "tests/browser.py",
    "KNOWMIND_FUZZ_EXAMPLES": "Makefile",
}


def _code(text: str) -> list[str]:
    """Fenced blocks and inline code spans: where commands are written."""
    text = text.replace("\\|", "|")  # a | inside code in a table
    fenced = re.findall(r"^```[^\n]*\n(.*?)^```", text, flags=re.S | re.M)
    fenced = [re.sub(r"(^|\s)(#|-- ).*$", "", block, flags=re.M) for block in fenced]  # comments
    prose = re.sub(r"^```[^\n]*\n.*?^```", "", text, flags=re.S | re.M)
    return fenced + re.findall(r"`([^`\n]+)`", prose)


def _named(pattern: str) -> set[tuple[str, str]]:
    found = set()
    for page in PAGES:
        for code in _code(page.read_text()):
            name = str(page.relative_to(ROOT))
            found |= {(name, m) for m in re.findall(pattern, code, flags=re.M)}
    return found


def test_readme_is_for_users():
    lines = README.read_text().splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines; depth goes into docs/"
    for page in REQUIRED:
        assert (DOCS / f"{page}.md").is_file(), page
    assert list((DOCS / "console").glob("*.png")), "the console's screenshots"


def test_no_run_history_in_readme_or_docs():
    """Docs show the current state; git keeps the history."""
    for path in DOCS.rglob("*"):
        name = path.name
        assert not _hashes(name.replace("_", " ")), f"a per-commit result file: {path}"
        assert not re.search(r"\d{4}-\d{2}-\d{2}", name), f"a dated result file: {path}"
        assert "latest" not in name and "_run" not in name, f"one run among others: {path}"
    for page in (README, *DOCS.rglob("*.md")):
        assert not _hashes(page.read_text()), f"{page.name}: commit hashes"


def _hashes(text: str) -> list[str]:
    words = re.findall(r"\b[0-9a-f]{7,40}\b", text)
    return [w for w in words if re.search(r"\d", w) and re.search(r"[a-f]", w)]


@cache
def _make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    return set(re.findall(r"^([A-Za-z0-9_-]+)\s*:(?!=)", text, flags=re.M))


def test_every_make_target_named_exists():
    named = _named(r"(?<![\w-])make ([a-z][a-z0-9-]*)")
    assert named, "the README names make run and make test"
    missing = sorted(
        f"{page}: make {target}" for page, target in named if target not in _make_targets()
    )
    assert not missing, missing


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def test_every_knowmind_command_named_exists():
    """`knowmind tenant create`, `.venv/bin/knowmind models pull|pull-llm`: each word that names
    a command or subcommand must be one; the npm client's commands (`npx -y knowmind login`)
    are not ours."""
    named = _named(
        r"(?<![\w./-])(?:\.venv/bin/)?(?<!npx )(?<!-y )(?<!-n )knowmind((?: [a-z][a-z0-9|-]*)+)"
    )
    assert len(named) > 10
    from knowmind.cli import build_parser

    missing = []
    for page, words in named:
        parsers = [build_parser()]
        for word in words.split():
            commands = {name: sub for p in parsers for name, sub in _subcommands(p).items()}
            if not commands:
                break  # an argument of a command that has no subcommands
            unknown = [w for w in word.split("|") if w not in commands]
            if unknown:
                missing.append(f"{page}: knowmind{words} ({', '.join(unknown)})")
                break
            parsers = [commands[w] for w in word.split("|")]
    assert not missing, missing


@cache
def _settings() -> set[str]:
    return set(re.findall(r"^\| `(KNOWMIND_[A-Z0-9_]+)`", settings_table(), flags=re.M))


def test_every_setting_named_exists():
    for variable, where in NOT_SETTINGS.items():
        assert variable not in _settings(), f"{variable} is a setting now: drop it here"
        place = ROOT / where
        files = place.rglob("*.py") if place.is_dir() else [place]
        assert any(variable in f.read_text() for f in files), f"{variable} is not read in {where}"
    unknown = set()
    for page in (*PAGES, ROOT / "benchmark" / "README.md"):
        for variable in re.findall(r"KNOWMIND_[A-Z0-9_]*[A-Z0-9]", page.read_text()):
            if variable not in _settings() and variable not in NOT_SETTINGS:
                unknown.add(f"{page.name}: {variable}")
    assert not unknown, sorted(unknown)


def test_settings_page_is_generated_from_the_code():
    """make docs (python scripts/docs.py settings) rewrites it after a setting changes."""
    docs = _docs_script()
    assert docs.block((DOCS / "settings.md").read_text(), "settings").strip() == settings_table()


def _slug(heading: str) -> str:
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_relative_links_resolve():
    pages = (*PAGES, ROOT / "benchmark" / "README.md")
    broken = []
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            resolved = (page.parent / path).resolve() if path else page
            if not resolved.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
            elif anchor and resolved.suffix == ".md":
                headings = re.findall(r"^#+ (.+)$", resolved.read_text(), flags=re.M)
                if anchor not in {_slug(h) for h in headings}:
                    broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, broken


def test_every_rest_operation_is_described():
    """Each path of the OpenAPI document (the generated reference) appears in a docs page, path
    parameters named alike or not."""
    from knowmind.app import create_app
    from knowmind.settings import Settings

    schema = create_app(Settings.from_env({})).openapi_schema.to_schema()
    described = "\n".join((DOCS / name).read_text() for name in ("api.md", "graph.md"))
    described = re.sub(r"\{[^}/]*\}", "{}", described)
    missing = []
    for path, operations in schema["paths"].items():
        for method in operations:
            if method in ("get", "post", "put", "patch", "delete"):
                key = f"{method.upper()} {re.sub(r'{[^}]*}', '{}', path)}"
                if not re.search(rf"{re.escape(key)}[`?\s]", described):
                    missing.append(key)
    assert not missing, missing


@cache
def _docs_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_script", ROOT / "scripts" / "docs.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_benchmark_block_is_rendered_from_the_published_summary():
    docs = _docs_script()
    summary = json.loads((DOCS / "benchmark" / "summary.json").read_text())
    assert docs.block(README.read_text(), "benchmark") == docs.render_headline(summary)
    for plot in ("headline.png", "quality.png", "scale_latency.png"):
        assert (DOCS / "benchmark" / plot).is_file(), plot


def _results(value: float) -> dict:
    system = {"splits": {"test": {"ndcg@10": value}, "dev": {"ndcg@10": value}}}
    return {
        "environment": {"cores": 2, "cpu": "test cpu"},
        "capabilities": {"embedder": {"model": "e5"}, "reranker": {"active": False}},
        "quick": False,
        "datasets": [
            {
                "dataset": "xquad-de",
                "systems": {"knowmind": system, "vector": system, "txtai-bb25": system},
            }
        ],
    }


def _scale(p50: float) -> dict:
    run = {"tenant_chunks": 100_000, "concurrency": 1, "p50_ms": p50, "p95_ms": 2 * p50}
    return {
        "layout": "full",
        "corpus": {"chunks": 310_000, "tenants": 1_100},
        "runs": [
            {**run, "embedding": "cached"},
            {**run, "embedding": "live", "stages_p50_ms": {"embed": 20.0}},
            {**run, "tenant_chunks": 100, "embedding": "cached"},
        ],
    }


@pytest.mark.parametrize("with_scale", [False, True])
def test_publishing_a_benchmark_run_replaces_the_last(tmp_path, with_scale):
    """make bench / make bench-scale end with scripts/docs.py benchmark: the report replaces its
    section of docs/benchmark.md (no commit hash), the plots are copied, the README's block is
    rendered; publishing the same run again changes nothing."""
    docs_script = _docs_script()
    docs, out = tmp_path / "docs", tmp_path / "bench-out"
    docs.mkdir()
    out.mkdir()
    (docs / "benchmark.md").write_text((DOCS / "benchmark.md").read_text())
    readme = tmp_path / "README.md"
    readme.write_text(README.read_text())
    for plot in ("quality.png", "scale_latency.png"):
        (out / plot).write_bytes(b"png")

    def publish(value: float, p50: float) -> None:
        results = _results(value) | ({"scale": _scale(p50)} if with_scale else {})
        (out / "results.json").write_text(json.dumps(results))
        scale_part = f"## Scale\n\nscale p50 {p50}\n" if with_scale else ""
        (out / "report.md").write_text(
            f"# knowmind benchmark\n\nknowmind 0.1.0 at {'ab12' * 10}.\n\n## Summary\n\n"
            f"value {value}\n{scale_part}\n![quality](quality.png)\n"
        )
        docs_script.publish(out, docs, readme, quality=True, scale=False)
        (out / "scale.json").write_text(json.dumps(_scale(p50)))
        (out / "scale.md").write_text(f"## Scale\n\nscale alone {p50}\n")
        docs_script.publish(out, docs, readme, quality=False, scale=True)

    publish(0.5, 10.0)
    publish(0.75, 12.5)
    page = (docs / "benchmark.md").read_text()
    assert "value 0.75" in page and "value 0.5" not in page
    assert "ab12" not in page and "knowmind 0.1.0." in page
    assert "### Summary" in page and "](benchmark/quality.png)" in page
    assert "scale alone 12.5" in page and "10.0" not in page
    headline = docs_script.block(readme.read_text(), "benchmark")
    assert "| xquad-de (ndcg@10) | **0.750** |" in headline
    assert "25.0 ms p95" in headline
    before = (page, readme.read_text())
    publish(0.75, 12.5)
    assert ((docs / "benchmark.md").read_text(), readme.read_text()) == before
