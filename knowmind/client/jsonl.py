"""Import a JSON Lines file of memories (one ``POST /v1/memories`` body per line) through the
batch endpoint: 100 lines a request, per-line results, a malformed line reported and skipped.

Safe to run again after an interruption: the server stores a memory once per content, so lines
stored already answer ``unchanged``."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from knowmind.client.http import Knowmind
from knowmind.client.types import KnowmindAPIError

__all__ = ["BATCH_SIZE", "ImportSummary", "JsonLine", "LineResult", "import_lines", "read_jsonl"]

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


@dataclass(slots=True)
class ImportSummary:
    created: int = 0
    unchanged: int = 0
    failed: int = 0
    errors: list[LineResult] = field(default_factory=list)

    def add(self, results: Sequence[LineResult]) -> None:
        for result in results:
            if result.status == "created":
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
    for start in range(0, len(lines), batch_size):
        results = _send(client, list(lines[start : start + batch_size]))
        summary.add(results)
        if on_batch is not None:
            on_batch(results)
    return summary


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
