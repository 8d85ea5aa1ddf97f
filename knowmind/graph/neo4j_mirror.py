"""Mirror of the PostgreSQL graph into Neo4j 5 over Bolt, in a portable Cypher subset.

Model: every node is ``(:Node:Entity|Memory {id, tenant, kind, name, entity_class})`` and every
edge a relationship typed by its predicate, ``[:WORKS_FOR {id, tenant, confidence, derived}]``.
Every node and relationship carries ``tenant``. Only Cypher that FalkorDB's Bolt endpoint (the
test server) also runs is used, and each request stays under its ~4 KB limit.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any, TypeVar
from uuid import UUID

from neo4j import AsyncDriver, AsyncGraphDatabase, AsyncSession
from neo4j.exceptions import Neo4jError, ServiceUnavailable, SessionExpired

from knowmind.contract.limits import PREDICATE_PATTERN
from knowmind.graph.changes import GraphChange

__all__ = ["MAX_REQUEST_BYTES", "GraphChange", "Neo4jMirror"]

MAX_REQUEST_BYTES = 3000  # query text + JSON rows per request (FalkorDB's Bolt dies near 4 KB)
_PREDICATE = re.compile(PREDICATE_PATTERN)
_KINDS = ("entity", "memory")
_ATTEMPTS = 3  # a stale pooled connection after a server restart costs one failed try
_T = TypeVar("_T")

_UPSERT_NODE = """UNWIND $rows AS r
MERGE (n:Node {id: r.id}) ON CREATE SET n.tenant = r.tenant
WITH n, r WHERE n.tenant = r.tenant
SET n.kind = r.kind, n.name = r.name, n.entity_class = r.entity_class
FOREACH (x IN CASE WHEN r.kind = 'entity' THEN [1] ELSE [] END | SET n:Entity)
FOREACH (x IN CASE WHEN r.kind = 'memory' THEN [1] ELSE [] END | SET n:Memory)"""
_DELETE_NODE = """UNWIND $rows AS r
MATCH (n:Node {id: r.id}) WHERE n.tenant = r.tenant DETACH DELETE n"""
_UPSERT_EDGE = """UNWIND $rows AS r
MERGE (a:Node {id: r.from_id}) ON CREATE SET a.tenant = r.tenant
MERGE (b:Node {id: r.to_id}) ON CREATE SET b.tenant = r.tenant
WITH a, b, r WHERE a.tenant = r.tenant AND b.tenant = r.tenant
MERGE (a)-[e:%s {id: r.id}]->(b)
SET e.tenant = r.tenant, e.confidence = r.confidence, e.derived = r.derived"""
_DELETE_EDGE = """UNWIND $rows AS r
MATCH ()-[e:%s {id: r.id}]->() WHERE e.tenant = r.tenant DELETE e"""


def _row(change: GraphChange) -> tuple[tuple[str, str], dict[str, Any]]:
    """(group key, UNWIND row) of one change; ValueError when it cannot be applied."""
    p, op = change.payload, change.op
    try:
        row: dict[str, Any] = {"id": str(p["id"]), "tenant": str(change.tenant_id)}
        if op in ("upsert_node", "delete_node"):
            if p["kind"] not in _KINDS:
                raise ValueError(f"unknown node kind {p['kind']!r}")
            if op == "upsert_node":
                row |= {"kind": p["kind"], "name": p["name"], "entity_class": p["entity_class"]}
            return (op, ""), row
        if op not in ("upsert_edge", "delete_edge"):
            raise ValueError(f"unknown graph change {op!r}")
        predicate = p["predicate"]
        if not isinstance(predicate, str) or not _PREDICATE.match(predicate):
            raise ValueError(f"invalid predicate {predicate!r}")
        if op == "upsert_edge":
            row |= {"from_id": str(p["from_id"]), "to_id": str(p["to_id"])}
            row |= {"confidence": p["confidence"], "derived": bool(p["derived"])}
        return (op, predicate), row
    except KeyError as exc:
        raise ValueError(f"{op} payload lacks {exc}") from None


def _escaped(text: str) -> str:
    """``text`` as it survives a server that splices it into a single-quoted literal."""
    return text.replace("\\", "\\\\").replace("'", "\\'")


def _query(op: str, predicate: str) -> str:
    return {
        "upsert_node": _UPSERT_NODE,
        "delete_node": _DELETE_NODE,
        "upsert_edge": _UPSERT_EDGE % predicate,
        "delete_edge": _DELETE_EDGE % predicate,
    }[op]


class Neo4jMirror:
    """Applies ``GraphChange`` batches to a Neo4j 5 database (default database, one driver)."""

    def __init__(self, driver: AsyncDriver, batch_size: int = 30) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self._driver = driver
        self.batch_size = batch_size
        self._named_ddl: bool | None = None  # Neo4j-style named IF NOT EXISTS index DDL works
        self._escape_strings = False  # the server splices string parameters into quotes
        self._indexed_types: set[str] = set()

    @classmethod
    async def connect(
        cls, url: str, user: str | None = None, password: str | None = None, batch_size: int = 30
    ) -> Neo4jMirror:
        """Open one long-lived driver and check the server answers (a few tries)."""
        auth = (user, password or "") if user else None
        driver = AsyncGraphDatabase.driver(url, auth=auth, connection_timeout=2.0)
        try:
            for attempt in range(1, 5):
                try:
                    await driver.verify_connectivity()
                    break
                except (ServiceUnavailable, SessionExpired):
                    if attempt == 4:
                        raise
                    await asyncio.sleep(0.2 * attempt)
            mirror = cls(driver, batch_size)
            mirror._escape_strings = await mirror._strings_need_escaping()
        except BaseException:
            await driver.close()
            raise
        return mirror

    async def _strings_need_escaping(self) -> bool:
        """FalkorDB's Bolt endpoint (the test server) splices string parameters into single
        quotes without escaping them: a name like "O'Brien" fails as an unknown DatabaseError.
        Neo4j passes parameters as values. One probe with a quote tells them apart; where the
        plain value fails and the escaped one comes back intact, strings are sent escaped."""
        probe = "O'Brien \\ ok"
        try:
            if await self._scalar("RETURN $v AS v", v=probe) == probe:
                return False
        except Neo4jError:
            pass
        if await self._scalar("RETURN $v AS v", v=_escaped(probe)) != probe:
            raise RuntimeError("the graph server mangles string parameters; cannot mirror names")
        return True

    async def ensure_schema(self) -> None:
        """Indexes on ``Node.id`` and ``Node.tenant``."""
        for prop in ("id", "tenant"):
            await self._index(f"knowmind_node_{prop}", "(n:Node)", "Node", prop)

    async def apply(self, changes: Sequence[GraphChange]) -> None:
        """Apply changes in order, idempotently, in one transaction; raises on any error."""
        groups: list[tuple[tuple[str, str], dict[str, dict[str, Any]]]] = []
        for change in changes:  # validate everything before sending anything
            key, row = _row(change)
            if self._escape_strings:
                row = {k: _escaped(v) if isinstance(v, str) else v for k, v in row.items()}
            if groups and groups[-1][0] == key:
                groups[-1][1][row["id"]] = row  # a later change of the same id supersedes
            else:
                groups.append((key, {row["id"]: row}))
        for (op, predicate), _ in groups:
            if op == "upsert_edge" and predicate not in self._indexed_types:
                for prop in ("id", "tenant"):
                    name = f"knowmind_rel_{predicate.lower()}_{prop}"
                    await self._index(name, f"()-[n:{predicate}]-()", predicate, prop)
                self._indexed_types.add(predicate)
        statements: list[tuple[str, list[dict[str, Any]]]] = []
        for (op, predicate), by_id in groups:
            query = _query(op, predicate)
            statements += [(query, c) for c in self._chunks(query, list(by_id.values()))]

        async def work(session: AsyncSession) -> None:
            async with await session.begin_transaction() as tx:
                for query, chunk in statements:
                    await (await tx.run(query, rows=chunk)).consume()

        if statements:
            await self._call(work)

    async def delete_tenant(self, tenant_id: UUID) -> None:
        """Remove every node and relationship of one tenant, 200 nodes per request."""
        query = "MATCH (n:Node {tenant: $t}) WITH n LIMIT 200 DETACH DELETE n RETURN count(n) AS c"
        while await self._scalar(query, t=str(tenant_id)):
            pass

    async def counts(self, tenant_id: UUID) -> tuple[int, int]:
        """(nodes, relationships) of one tenant."""
        t = str(tenant_id)
        nodes = await self._scalar("MATCH (n:Node {tenant: $t}) RETURN count(n) AS c", t=t)
        rels = await self._scalar(
            "MATCH (a:Node {tenant: $t})-[r]->() WHERE r.tenant = $t RETURN count(r) AS c", t=t
        )
        return int(nodes), int(rels)

    async def ping(self) -> bool:
        """One round trip, no retries."""
        try:
            async with self._driver.session(database=None) as session:
                record = await (await session.run("RETURN 1 AS c")).single()
            return record is not None and record[0] == 1
        except Exception:
            return False

    async def close(self) -> None:
        await self._driver.close()

    def _chunks(self, query: str, rows: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
        """At most ``batch_size`` rows and ``MAX_REQUEST_BYTES`` (query + JSON rows) a chunk."""
        budget = MAX_REQUEST_BYTES - len(query.encode())  # json.dumps(chunk) is exactly the sum
        chunk: list[dict[str, Any]] = []
        size = 0
        for row in rows:
            row_size = len(json.dumps(row, ensure_ascii=False).encode()) + 2
            if chunk and (len(chunk) >= self.batch_size or size + row_size > budget):
                yield chunk
                chunk, size = [], 0
            chunk.append(row)
            size += row_size
        if chunk:
            yield chunk

    async def _call(self, work: Callable[[AsyncSession], Awaitable[_T]]) -> _T:
        """Run ``work`` in a fresh session; retry on a dead connection (e.g. server restarted:
        the driver drops its stale pool on the first failure). Every caller is idempotent."""
        for attempt in range(1, _ATTEMPTS + 1):
            try:
                async with self._driver.session(database=None) as session:
                    return await work(session)
            except (ServiceUnavailable, SessionExpired):
                if attempt == _ATTEMPTS:
                    raise
                await asyncio.sleep(0.2 * attempt)
        raise AssertionError("unreachable")

    async def _scalar(self, query: str, **params: Any) -> Any:
        async def work(session: AsyncSession) -> Any:
            record = await (await session.run(query, params)).single()
            return None if record is None else record[0]

        return await self._call(work)

    async def _index(self, name: str, pattern: str, label: str, prop: str) -> None:
        """Neo4j: named ``IF NOT EXISTS`` DDL. Otherwise (FalkorDB) the unnamed form, where an
        error is fine if ``db.indexes()`` shows the index already exists."""
        if self._named_ddl is not False:
            try:
                await self._scalar(f"CREATE INDEX {name} IF NOT EXISTS FOR {pattern} ON (n.{prop})")
                self._named_ddl = True
                return
            except Neo4jError:
                if self._named_ddl:
                    raise
                self._named_ddl = False
        try:
            await self._scalar(f"CREATE INDEX FOR {pattern} ON (n.{prop})")
        except Neo4jError:
            if (label, prop) not in await self._unnamed_indexes():
                raise

    async def _unnamed_indexes(self) -> set[tuple[str, str]]:
        async def work(session: AsyncSession) -> set[tuple[str, str]]:
            result = await session.run("CALL db.indexes() YIELD label, properties")
            return {(r["label"], p) async for r in result for p in r["properties"]}

        try:
            return await self._call(work)
        except Neo4jError:
            return set()
