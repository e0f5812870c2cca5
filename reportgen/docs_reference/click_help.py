"""A Markdown extension for the commands' reference: mkdocs-click copies each command's help
text into the page as Markdown, where click's verbatim blocks (a paragraph after `\\b`: "Examples:"
and the indented commands under it) would be re-flowed into one line, and `'MNIST_*'` read as
emphasis. This turns every such block — a line ending in ":" followed by lines indented by two
spaces — into a code block, as `reportgen COMMAND --help` prints it. It runs right after
mkdocs-click's preprocessor (priority 141)."""

from __future__ import annotations

import re

from markdown.extensions import Extension
from markdown.preprocessors import Preprocessor

_INDENTED = re.compile(r"^  \S")


def fence_verbatim_blocks(lines: list[str]) -> list[str]:
    out: list[str] = []
    i, fenced = 0, False
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            fenced = not fenced
        out.append(line)
        i += 1
        if fenced or not line.rstrip().endswith(":") or line.startswith(("|", " ", "#")):
            continue
        block = []
        while i < len(lines) and _INDENTED.match(lines[i]):
            block.append(lines[i][2:])
            i += 1
        if block:
            out += ["", "```text", *block, "```", ""]
    return out


class _Fence(Preprocessor):
    def run(self, lines: list[str]) -> list[str]:
        return fence_verbatim_blocks(lines)


class ClickHelpExtension(Extension):
    def extendMarkdown(self, md):
        md.preprocessors.register(_Fence(md), "reportgen_click_help", 140)


def makeExtension(**kwargs):
    return ClickHelpExtension(**kwargs)
