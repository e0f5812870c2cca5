"""Markdown pieces the generated reference pages share."""

from __future__ import annotations


def cell(text: str) -> str:
    """Text that stays inside one table cell (no line breaks, no column separators)."""
    return " ".join(str(text).split()).replace("|", "\\|")


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)
