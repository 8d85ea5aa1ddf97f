"""Import a JSON Lines file of memories (one ``POST /v1/memories`` body per line) through the
batch endpoint: 100 lines a request, per-line results, a malformed line reported and skipped.
A line that is a conversation (a ``POST /v1/memories/conversation`` body: it has ``messages``)
is sent on its own through ``remember_conversation``: its turns count as memories.

Safe to run again after an interruption: the server stores a memory once per content, so lines
stored already answer ``unchanged``."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from knowmind.client.sync import Knowmind
from knowmind.client.types import KnowmindAPIError

__all__ = [
    "BATCH_SIZE",
    "ImportSummary",
    "JsonLine",
    "LineResult",
    "import_lines",
    "import_parts",
    "is_conversation",
    "read_jsonl",
]

BATCH_SIZE = 100  # the batch endpoint's limit
_TOO_LARGE = 413
_CONTENT_REFUSALS = frozenset({400, 413, 422})  # about the lines sent: fail those, go on


@dataclass(frozen=True, slots=True)
class JsonLine:
    number: int  # 1-based line number in the file
    item: Any = None
    error: str | None = None  # why the line could not be read as JSON


@dataclass(frozen=True, slots=True)
class LineResult:
    number: int
    status: str  # "created" | "unchanged" | "error"
    error: str | None = None  # "field: message" for an error
    turns: tuple[int, int] | None = None  # a conversation: its turns created and unchanged


@dataclass(slots=True)
class ImportSummary:
    created: int = 0
    unchanged: int = 0
    failed: int = 0
    errors: list[LineResult] = field(default_factory=list)

    def add(self, results: Sequence[LineResult]) -> None:
        for result in results:
            if result.turns is not None and result.status != "error":
                self.created += result.turns[0]
                self.unchanged += result.turns[1]
            elif result.status == "created":
                self.created += 1
            elif result.status == "unchanged":
                self.unchanged += 1
            else:
                self.failed += 1
                self.errors.append(result)


def read_jsonl(path: Path) -> list[JsonLine]:
    """Every non-blank line, parsed (or with the reason it could not be)."""
    lines = []
    with path.open(encoding="utf-8") as handle:
        for number, text in enumerate(handle, start=1):
            if not text.strip():
                continue
            try:
                lines.append(JsonLine(number, json.loads(text)))
            except json.JSONDecodeError as exc:
                lines.append(JsonLine(number, error=f"malformed JSON ({exc.msg})"))
    return lines


def import_lines(
    client: Knowmind,
    lines: Sequence[JsonLine],
    *,
    on_batch: Callable[[Sequence[LineResult]], None] | None = None,
    batch_size: int = BATCH_SIZE,
) -> ImportSummary:
    """Send ``lines`` in batches; ``on_batch`` hears each batch's results (a progress bar).

    A batch too large for the server's body limit is split; an error that refuses the whole
    request for its content (4xx) fails its lines; one about the token or the server (401,
    403, 5xx after the client's retries, no connection) stops the import and is raised."""
    summary = ImportSummary()
    for part in import_parts(lines, batch_size):
        conversation = is_conversation(part[0])
        results = _send_conversation(client, part[0]) if conversation else _send(client, part)
        summary.add(results)
        if on_batch is not None:
            on_batch(results)
    return summary


def is_conversation(line: JsonLine) -> bool:
    """A line that is a conversation (it has ``messages``; a memory's body never has)."""
    return line.error is None and isinstance(line.item, dict) and "messages" in line.item


def import_parts(lines: Sequence[JsonLine], batch_size: int) -> Iterator[list[JsonLine]]:
    """Runs of up to ``batch_size`` memory lines, and each conversation line alone, in order."""
    batch: list[JsonLine] = []
    for line in lines:
        if is_conversation(line):
            if batch:
                yield batch
                batch = []
            yield [line]
            continue
        batch.append(line)
        if len(batch) == batch_size:
            yield batch
            batch = []
    if batch:
        yield batch


def _send_conversation(client: Knowmind, line: JsonLine) -> list[LineResult]:
    body = dict(line.item)
    messages, offset = body.pop("messages"), body.pop("offset", 0)
    if not isinstance(messages, list):
        return [LineResult(line.number, "error", "messages: must be an array")]
    if not isinstance(offset, int) or isinstance(offset, bool):
        return [LineResult(line.number, "error", "offset: must be an integer")]
    try:
        done = client.remember_conversation(messages, offset=offset, **body)
    except KnowmindAPIError as exc:
        if exc.status not in _CONTENT_REFUSALS:
            raise
        reason = f"{exc.field}: {exc.detail}" if exc.field else exc.detail
        return [LineResult(line.number, "error", reason)]
    except TypeError as exc:  # a key the client does not take as an argument
        return [LineResult(line.number, "error", f"item: {exc}")]
    return [LineResult(line.number, done.status, turns=(done.created, done.unchanged))]


def _send(client: Knowmind, part: list[JsonLine]) -> list[LineResult]:
    unreadable = [
        LineResult(line.number, "error", line.error or "item: must be a JSON object")
        for line in part
        if line.error or not isinstance(line.item, dict)
    ]
    readable = [line for line in part if line.error is None and isinstance(line.item, dict)]
    if not readable:
        return unreadable
    try:
        answer = client.remember_many([line.item for line in readable])
    except KnowmindAPIError as exc:
        if exc.status == _TOO_LARGE and len(readable) > 1:
            half = len(readable) // 2
            halves = _send(client, readable[:half]) + _send(client, readable[half:])
            return sorted(unreadable + halves, key=lambda r: r.number)
        if exc.status not in _CONTENT_REFUSALS:
            raise  # the token, the URL, the rate limit or the server: stop, say how far
        reason = f"{exc.field}: {exc.detail}" if exc.field else exc.detail
        failed = [LineResult(line.number, "error", reason) for line in readable]
        return sorted(unreadable + failed, key=lambda r: r.number)
    by_index = {item.index: item for item in answer.results}
    results = []
    for index, line in enumerate(readable):
        item = by_index.get(index)
        if item is None:
            results.append(LineResult(line.number, "error", "no result for this line"))
        elif item.error is not None:
            where = item.error.get("field") or "item"
            results.append(
                LineResult(line.number, "error", f"{where}: {item.error.get('message')}")
            )
        else:
            results.append(LineResult(line.number, item.status))
    return sorted(unreadable + results, key=lambda r: r.number)
