"""The one place that prints: notices, progress bars, summaries.

Progress goes to stderr so that `--json` output on stdout stays machine-readable.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Iterator

from tqdm import tqdm


def notice(message: str) -> None:
    """A one-line notice for the user (e.g. which data source was used)."""
    print(message, file=sys.stderr, flush=True)


def echo(message: str = "") -> None:
    """Normal output on stdout."""
    print(message, flush=True)


@contextmanager
def progress(total: int | None, description: str, unit: str = "it") -> Iterator[tqdm]:
    """A progress bar on stderr; quiet in non-interactive runs except for the final line."""
    bar = tqdm(total=total, desc=description, unit=unit, file=sys.stderr, dynamic_ncols=True,
               mininterval=0.5, leave=True)
    try:
        yield bar
    finally:
        bar.close()
