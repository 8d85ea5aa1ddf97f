"""Markdown-aware chunking: headings start chunks, fenced code blocks and tables stay whole,
prose is split at sentence boundaries. Each chunk of a section repeats the section's heading
path so it reads on its own."""

from __future__ import annotations

import re
from dataclasses import dataclass

from knowmind.ingest.chunker import chunk_text

__all__ = ["chunk_markdown"]

_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_FENCE = re.compile(r"^(```|~~~)")
MAX_ATOMIC_FACTOR = 4  # a code block or table larger than 4 chunks is cut at line boundaries


@dataclass(slots=True)
class _Block:
    text: str
    atomic: bool  # code block or table: never split mid-way


@dataclass(slots=True)
class _Section:
    path: list[str]
    blocks: list[_Block]


def _sections(text: str) -> list[_Section]:
    sections = [_Section([], [])]
    path: list[tuple[int, str]] = []
    lines = text.splitlines()
    i = 0
    paragraph: list[str] = []

    def flush() -> None:
        if any(line.strip() for line in paragraph):
            sections[-1].blocks.append(_Block("\n".join(paragraph).strip(), atomic=False))
        paragraph.clear()

    while i < len(lines):
        line = lines[i]
        if fence := _FENCE.match(line.strip()):
            flush()
            end = i + 1
            while end < len(lines) and not lines[end].strip().startswith(fence.group(1)):
                end += 1
            sections[-1].blocks.append(_Block("\n".join(lines[i : end + 1]), atomic=True))
            i = end + 1
            continue
        if line.lstrip().startswith("|"):
            flush()
            end = i
            while end < len(lines) and lines[end].lstrip().startswith("|"):
                end += 1
            sections[-1].blocks.append(_Block("\n".join(lines[i:end]), atomic=True))
            i = end
            continue
        if heading := _HEADING.match(line):
            flush()
            level = len(heading.group(1))
            path = [(lvl, title) for lvl, title in path if lvl < level] + [
                (level, heading.group(2))
            ]
            sections.append(_Section([title for _, title in path], []))
        elif not line.strip():
            flush()
        else:
            paragraph.append(line)
        i += 1
    flush()
    return [s for s in sections if s.blocks]


def _split_atomic(block: str, size: int) -> list[str]:
    if len(block) <= size * MAX_ATOMIC_FACTOR:
        return [block]
    pieces, current = [], ""
    for line in block.splitlines():
        if current and len(current) + len(line) + 1 > size:
            pieces.append(current)
            current = ""
        current = f"{current}\n{line}" if current else line
    return [*pieces, current] if current else pieces


def chunk_markdown(text: str, target_chars: int = 1000, overlap_chars: int = 200) -> list[str]:
    chunks: list[str] = []
    for section in _sections(text):
        header = " > ".join(section.path)
        budget = max(target_chars - len(header) - 1, target_chars // 2)
        pieces: list[str] = []
        for block in section.blocks:
            if block.atomic:
                pieces.extend(_split_atomic(block.text, budget))
            else:
                pieces.extend(chunk_text(block.text, budget, min(overlap_chars, budget // 2)))
        merged: list[str] = []
        for piece in pieces:  # pack small neighbours (a short paragraph and its table)
            if merged and len(merged[-1]) + len(piece) + 2 <= budget:
                merged[-1] = f"{merged[-1]}\n\n{piece}"
            else:
                merged.append(piece)
        chunks.extend(f"{header}\n{m}" if header else m for m in merged)
    return chunks
