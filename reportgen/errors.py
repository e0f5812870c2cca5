"""The error types reportgen raises for problems a user can cause or meet.

Every message is one line that says what happened, which file or value, what was expected, what
was received and how to fix it (the habit of MkDocs' config errors and Keras's "Received: ..."
messages). The command line prints it as `Error: ...` and exits 2 (no traceback unless
`--debug`); a build that finished with some models or steps failed exits 1.
"""

from __future__ import annotations

EXIT_USER_ERROR = 2       # bad input: nothing (or nothing more) was done
EXIT_PARTIAL_FAILURE = 1  # the run finished, but some models or steps failed


def _one_line(text: str) -> str:
    """Collapse whitespace (a wrapped OS or library message) so the error stays on one line."""
    return " ".join(str(text).split())


class ReportgenError(Exception):
    """A user-facing error: what / expected / received / fix, printed on one line."""

    def __init__(self, what: str, *, expected: str | None = None, received: str | None = None,
                 fix: str | None = None):
        self.what = what
        self.expected = expected
        self.received = received
        self.fix = fix
        super().__init__(self.message)

    @property
    def message(self) -> str:
        parts = [_sentence(self.what)]
        if self.expected is not None:
            parts.append(_sentence(f"Expected {self.expected}"))
        if self.received is not None:
            parts.append(_sentence(f"Received {self.received}"))
        if self.fix is not None:
            parts.append(_sentence(f"Fix: {self.fix}"))
        return " ".join(parts)


def _sentence(text: str) -> str:
    """One line ending with one full stop (or the question it quotes: "Did you mean X?")."""
    text = _one_line(text)
    return text if text.endswith("?") else text.rstrip(".") + "."


class StoreError(ReportgenError):
    """The artifact store (or another working folder) cannot be used: not a model's fault, so a
    build stops at once instead of reporting every model as failed."""
