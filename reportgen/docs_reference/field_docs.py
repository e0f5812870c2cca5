"""What each field of a settings dataclass means, read from the comments its module gives it.

A params.toml key is documented where it is declared: the comment on the field's own line, or
the comment lines directly above it (a string literal right after the field, an attribute
docstring, counts too). The reference page of params.toml is built from these, so a key is
never documented in two places; a field without any is `None` here, and
tests/test_docs.py fails on it.
"""

from __future__ import annotations

import ast
import inspect
import io
import textwrap
import tokenize
from dataclasses import MISSING, Field, fields


def _comments(source: str) -> dict[int, tuple[str, bool]]:
    """{line: (comment text, whether the line holds nothing but the comment)}."""
    found = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            row = token.start[0]
            own_line = not token.line[:token.start[1]].strip()
            found[row] = (token.string.lstrip("#").strip(), own_line)
    return found


def field_meanings(cls) -> dict[str, str | None]:
    """{field name: its meaning} for dataclass `cls`, from its source's comments."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {f.name: None for f in fields(cls)}
    comments = _comments(source)
    body = ast.parse(source).body[0].body
    meanings = {}
    for i, node in enumerate(body):
        if not isinstance(node, ast.AnnAssign) or not isinstance(node.target, ast.Name):
            continue
        row = node.lineno
        parts = []
        above = row - 1
        while above in comments and comments[above][1]:
            parts.insert(0, comments[above][0])
            above -= 1
        if row in comments and not comments[row][1]:
            parts.append(comments[row][0])
        following = body[i + 1] if i + 1 < len(body) else None
        if (isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)):
            parts.append(" ".join(following.value.value.split()))
        meanings[node.target.id] = " ".join(parts) or None
    return {f.name: meanings.get(f.name) for f in fields(cls)}


def default_of(f: Field):
    """The field's default value (a factory's product), or MISSING."""
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        return f.default_factory()
    return MISSING


def annotation(cls, f: Field) -> str:
    """The field's annotation as written (`from __future__ import annotations` keeps strings)."""
    return f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
