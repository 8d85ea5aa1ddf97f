"""Tenant export and import: a versioned JSON Lines archive of one tenant (portability, backups).

Export reads one consistent snapshot (a read-only REPEATABLE READ transaction as the app role,
row-level security scoping it to the tenant) and streams it in batches. Import restores an
archive into an empty tenant in one transaction as the schema owner: all of it or nothing. Row
ids are kept (every key of a tenant table leads with tenant_id, so they cannot collide with
another tenant's, on the same server either). Derived data is rebuilt by the database as on any
write: the chunk triggers keep the BM25 statistics and the outbox triggers queue the graph
mirror's changes. Neither direction logs any content.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import msgspec
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection

from knowmind.db.engine import Database, scope_transaction
from knowmind.db.migrate import known_revision, revision_of, schema_meta
from knowmind.errors import ConflictError, InvalidInputError, NotFoundError
from knowmind.ingest.sentences import SENTENCE_JOB
from knowmind.recall.timeframe import mentions_time
from knowmind.services.audit import record
from knowmind.services.auth import Principal
from knowmind.store import tenant_archive as archive_store
from knowmind.store import tenants as tenant_store
from knowmind.store.archive_records import (
    FORMAT,
    FORMAT_VERSION,
    KINDS,
    ArchiveRecord,
    Header,
    KindSpec,
    Memory,
    Row,
    TenantPart,
    Trailer,
)
from knowmind.store.rows import TenantRow
from knowmind.store.search import MemoryFilters
from knowmind.store.sentences import queue_sentence_job
from knowmind.store.stats import analyze_recall_tables

__all__ = ["ArchiveError", "ImportReport", "ImportTarget", "TenantArchiveService"]

EXPORT_BATCH = 500
IMPORT_BATCH = 200

_SPEC_OF: dict[type, KindSpec] = {spec.record: spec for spec in KINDS}
_POSITION = {spec.kind: i for i, spec in enumerate(KINDS)}


class ArchiveError(InvalidInputError):
    """The archive cannot be imported (unknown format, truncated, other embedder, ...)."""

    def __init__(self, message: str) -> None:
        super().__init__("archive", message)


@dataclass(frozen=True, slots=True)
class ImportTarget:
    """An existing empty tenant (``tenant_id``) or one to create (``name``)."""

    tenant_id: UUID | None = None
    name: str | None = None


@dataclass(frozen=True, slots=True)
class ImportReport:
    tenant: TenantRow
    counts: dict[str, int]
    audit_id: int
    notes: list[str] = field(default_factory=list)


class TenantArchiveService:
    def __init__(self, db: Database, embedding_model: str, embedding_dim: int) -> None:
        self.db = db
        self.embedding_model = embedding_model
        self.embedding_dim = embedding_dim

    async def export(
        self, tenant_id: UUID, who: Principal | None, filters: MemoryFilters | None = None
    ) -> AsyncIterator[bytes]:
        """The archive's lines (each ending in a newline), in batches; NotFoundError at once
        when there is no such tenant. ``filters`` (a user, agent, session, event-time window):
        an archive of those memories and what hangs on them only (``store.tenant_archive``)."""
        async with self.db.owner_tx() as conn:
            if await tenant_store.get_tenant(conn, tenant_id) is None:
                raise NotFoundError(f"tenant {tenant_id} not found")
            revision = await revision_of(conn)
        return self._lines(tenant_id, revision or "", who, filters)

    async def _lines(
        self,
        tenant_id: UUID,
        revision: str,
        who: Principal | None,
        filters: MemoryFilters | None = None,
    ) -> AsyncIterator[bytes]:
        encoder = msgspec.json.Encoder()
        counts: dict[str, int] = {}
        async with self.db.tenant_snapshot(tenant_id) as conn:
            yield encoder.encode(await _header(conn, tenant_id, revision)) + b"\n"
            for spec in KINDS:
                counts[spec.kind] = 0
                async for rows in archive_store.read_rows(conn, spec, EXPORT_BATCH, filters):
                    counts[spec.kind] += len(rows)
                    yield _encode_lines(encoder, rows)
        async with self.db.owner_tx() as conn:
            detail: dict[str, Any] = {"format_version": FORMAT_VERSION, "counts": counts}
            if filters is not None:
                detail["filters"] = _filter_detail(filters)
            await record(conn, who, "tenant.export", tenant_id, [tenant_id], detail)
        yield encoder.encode(Trailer(counts=counts)) + b"\n"

    async def import_archive(
        self,
        lines: Iterable[bytes],
        target: ImportTarget,
        who: Principal | None = None,
        progress: Callable[[int], object] | None = None,
    ) -> ImportReport:
        """Restore an archive (its lines, e.g. an open file) into ``target``, all or nothing.
        ``progress`` is told the size of each line read."""
        records = _records(lines, progress)
        header = _first_header(records)
        self._check_header(header)
        notes: list[str] = []
        async with self.db.owner_tx() as conn:
            tenant = await self._target(conn, target, header, who)
            await scope_transaction(conn, tenant.id, write=True)
            await _refuse_non_empty(conn, tenant.id)
            if tenant.language != header.tenant.language:
                notes.append(
                    f"the tenant's language is {tenant.language}, the archive's "
                    f"{header.tenant.language}: queries are parsed in {tenant.language}"
                )
            if header.tenant.settings:
                await tenant_store.update_tenant_settings(conn, tenant.id, header.tenant.settings)
            counts = await self._insert_all(conn, tenant.id, records)
            # an archive carries no sentence vectors: the job worker makes them
            await queue_sentence_job(conn, tenant.id, SENTENCE_JOB)
            detail: dict[str, Any] = {"format_version": FORMAT_VERSION, "counts": counts}
            detail["source_tenant"] = str(header.tenant.id)
            audit_id = await record(conn, who, "tenant.import", tenant.id, [tenant.id], detail)
        async with self.db.owner_tx() as conn:
            await analyze_recall_tables(conn)  # the planner should know the new rows
        return ImportReport(tenant, counts, audit_id, notes)

    def _check_header(self, header: Header) -> None:
        if header.format != FORMAT:
            raise ArchiveError(f"format {header.format!r} is not {FORMAT!r}")
        if header.format_version != FORMAT_VERSION:
            raise ArchiveError(
                f"format version {header.format_version} is unknown to this knowmind "
                f"(it reads version {FORMAT_VERSION})"
            )
        if not known_revision(header.schema_revision):
            raise ArchiveError(
                f"schema revision {header.schema_revision!r} is unknown here: the archive was "
                "made by a newer knowmind; upgrade this one first"
            )
        ours = (self.embedding_model, self.embedding_dim)
        if (header.embedding_model, header.embedding_dim) != ours:
            raise ArchiveError(
                f"the archive's vectors are of embedder {header.embedding_model!r} "
                f"({header.embedding_dim} dimensions), this server's embedder is "
                f"{ours[0]!r} ({ours[1]} dimensions): its vectors would be meaningless here"
            )

    async def _target(
        self, conn: AsyncConnection, target: ImportTarget, header: Header, who: Principal | None
    ) -> TenantRow:
        if target.tenant_id is not None:
            row = await tenant_store.get_tenant(conn, target.tenant_id)
            if row is None:
                raise NotFoundError(f"tenant {target.tenant_id} not found")
            return row
        name = (target.name or "").strip()
        if not name:
            raise InvalidInputError("name", "give the id of an empty tenant or a new name")
        language = header.tenant.language
        if not await tenant_store.language_exists(conn, language):
            raise ArchiveError(f"language {language!r} is not a text search configuration here")
        try:
            row = await tenant_store.create_tenant(
                conn, name, language, self.embedding_model, self.embedding_dim
            )
        except tenant_store.DuplicateTenantError as exc:
            raise ConflictError(f"a tenant named {name!r} exists already", "name") from exc
        await record(conn, who, "tenant.create", row.id, [row.id], {"language": language})
        return row

    async def _insert_all(
        self, conn: AsyncConnection, tenant_id: UUID, records: Iterator[tuple[int, ArchiveRecord]]
    ) -> dict[str, int]:
        counts = {spec.kind: 0 for spec in KINDS}
        batch: list[Row] = []
        current: KindSpec | None = None
        trailer: Trailer | None = None
        for number, item in records:
            if trailer is not None:
                raise ArchiveError(f"line {number}: a record after the trailer")
            if isinstance(item, Header):
                raise ArchiveError(f"line {number}: a second header")
            if isinstance(item, Trailer):
                trailer = item
                continue
            spec = _SPEC_OF[type(item)]
            if spec is not current:
                await _flush(conn, tenant_id, current, batch)
                if current is not None and _POSITION[spec.kind] <= _POSITION[current.kind]:
                    raise ArchiveError(f"line {number}: {spec.kind} out of order")
                current = spec
            self._check_vector(number, item)
            if isinstance(item, Memory) and item.states_time is None:
                item = msgspec.structs.replace(item, states_time=mentions_time(item.content))
            batch.append(item)
            counts[spec.kind] += 1
            if len(batch) >= IMPORT_BATCH:
                await _flush(conn, tenant_id, current, batch)
        await _flush(conn, tenant_id, current, batch)
        _check_trailer(trailer, counts)
        return counts

    def _check_vector(self, number: int, item: Row) -> None:
        vector = getattr(item, "embedding", None)
        if vector is not None and len(vector) != self.embedding_dim:
            raise ArchiveError(
                f"line {number}: a vector of {len(vector)} dimensions, expected "
                f"{self.embedding_dim}"
            )


async def _header(conn: AsyncConnection, tenant_id: UUID, revision: str) -> Header:
    row = await tenant_store.get_tenant(conn, tenant_id)
    if row is None:  # erased between the check and the snapshot
        raise NotFoundError(f"tenant {tenant_id} not found")
    meta = await schema_meta(conn)
    return Header(
        format=FORMAT,
        format_version=FORMAT_VERSION,
        schema_revision=revision,
        embedding_model=meta["embedding_model"],
        embedding_dim=int(meta["embedding_dim"]),
        embedding_storage=meta.get("embedding_storage", "vector"),
        tenant=TenantPart(
            id=row.id,
            name=row.name,
            language=row.language,
            settings=await tenant_store.tenant_settings(conn, tenant_id),
            created_at=row.created_at,
        ),
        exported_at=datetime.now(UTC),
    )


def _filter_detail(filters: MemoryFilters) -> dict[str, Any]:
    """A filtered export's filters as its audit entry keeps them: which scopes and times were
    asked for (the ids are the tenant's own, not content)."""
    names = ("user_id", "agent_id", "session_id", "occurred_after", "occurred_before")
    values = {name: getattr(filters, name) for name in names}
    return {k: v.isoformat() if isinstance(v, datetime) else v for k, v in values.items() if v}


def _encode_lines(encoder: msgspec.json.Encoder, rows: list[Row]) -> bytes:
    buffer = bytearray()
    for row in rows:
        encoder.encode_into(row, buffer, len(buffer))
        buffer += b"\n"
    return bytes(buffer)


_DECODER = msgspec.json.Decoder(ArchiveRecord)


def _records(
    lines: Iterable[bytes], progress: Callable[[int], object] | None
) -> Iterator[tuple[int, ArchiveRecord]]:
    """(line number, record) of every non-blank line; says which line does not parse (the
    message names the field, never the content)."""
    for number, line in enumerate(lines, start=1):
        if progress is not None:
            progress(len(line))
        if not line.strip():
            continue
        try:
            yield number, _DECODER.decode(line)
        except msgspec.DecodeError as exc:
            raise ArchiveError(f"line {number}: {exc}") from None


def _first_header(records: Iterator[tuple[int, ArchiveRecord]]) -> Header:
    first = next(records, None)
    if first is None or not isinstance(first[1], Header):
        raise ArchiveError(f"not a {FORMAT} archive: the first line is no header")
    return first[1]


async def _refuse_non_empty(conn: AsyncConnection, tenant_id: UUID) -> None:
    held = {k: n for k, n in (await archive_store.kind_row_counts(conn, tenant_id)).items() if n}
    if held:
        listed = ", ".join(f"{n} {kind}" for kind, n in held.items())
        raise ConflictError(
            f"tenant {tenant_id} is not empty ({listed}): an archive is imported only into an "
            "empty tenant"
        )


async def _flush(
    conn: AsyncConnection, tenant_id: UUID, spec: KindSpec | None, batch: list[Row]
) -> None:
    if spec is None or not batch:
        return
    try:
        await archive_store.insert_rows(conn, tenant_id, spec, batch)
    except DBAPIError as exc:  # a damaged archive; the message has no values, only the rule
        cause = exc.orig.__cause__ if exc.orig is not None else None
        rule = getattr(cause, "constraint_name", None) or type(cause or exc.orig).__name__
        raise ArchiveError(f"{spec.kind} rows do not fit the schema ({rule})") from None
    batch.clear()


def _check_trailer(trailer: Trailer | None, counts: dict[str, int]) -> None:
    if trailer is None:
        raise ArchiveError("the archive is truncated: it ends without its trailer line")
    expected = {kind: trailer.counts.get(kind, 0) for kind in counts}
    unknown = sorted(set(trailer.counts) - set(counts))
    if expected != counts or unknown:
        differ = [
            f"{k}: {counts[k]} read, {expected[k]} listed"
            for k in counts
            if expected[k] != counts[k]
        ]
        raise ArchiveError(
            "the archive is truncated or altered: the trailer's counts differ ("
            + "; ".join(differ + [f"unknown kind {k}" for k in unknown])
            + ")"
        )
