"""The one error type reportgen raises for bad input.

Every message says what happened, what was expected, what was received and how to fix it
(the habit of MkDocs' config errors and Keras's "Received: ..." messages).
"""

from __future__ import annotations


class ReportgenError(Exception):
    """A user-facing error: what / expected / received / fix."""

    def __init__(self, what: str, *, expected: str | None = None, received: str | None = None,
                 fix: str | None = None):
        self.what = what
        self.expected = expected
        self.received = received
        self.fix = fix
        super().__init__(self.message)

    @property
    def message(self) -> str:
        lines = [self.what]
        if self.expected is not None:
            lines.append(f"  expected: {self.expected}")
        if self.received is not None:
            lines.append(f"  received: {self.received}")
        if self.fix is not None:
            lines.append(f"  fix: {self.fix}")
        return "\n".join(lines)
