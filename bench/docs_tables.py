"""The benchmark tables of reportgen's docs are written by the scripts that measure them, not
typed: a script run as `python bench/bench_NAME.py ...` prints its tables as it always did and,
when it finishes, writes what it printed to `docs/benchmarks/tables/bench_NAME.md`, headed by
the exact command, the date and the machine's load, which the Benchmarks page
(docs/explanation/benchmarks.md) includes. A run that fails writes nothing.

    if __name__ == "__main__":
        with recorded("bench_xla"):
            main()
"""

from __future__ import annotations

import contextlib
import datetime
import io
import os
import shlex
import sys
from pathlib import Path

TABLES = Path(__file__).resolve().parents[1] / "docs" / "benchmarks" / "tables"


class _Tee(io.TextIOBase):
    def __init__(self, stream):
        self.stream, self.text = stream, io.StringIO()

    def write(self, s):
        self.text.write(s)
        return self.stream.write(s)

    def flush(self):
        self.stream.flush()


def _load() -> str:
    return " ".join(f"{v:.1f}" for v in os.getloadavg())


def as_markdown(printed: str) -> str:
    """What a script printed, with blank lines around its tables (Markdown needs them)."""
    out: list[str] = []
    for line in printed.rstrip().splitlines():
        line = line.rstrip()
        row = line.startswith("|")
        if out and out[-1] and out[-1].startswith("|") != row:
            out.append("")
        out.append(line)
    return "\n".join(out) + "\n"


def page(script: str, args: list[str], printed: str, load_start: str, load_end: str,
         when: datetime.date) -> str:
    command = " ".join(["python", f"bench/{script}.py", *map(shlex.quote, args)])
    return (f"<!-- Written by {script}.py; run it again rather than editing this file. -->\n"
            f"Measured by `{command}` on {when.isoformat()} ({os.cpu_count()} CPUs; load "
            f"average {load_start} at the start, {load_end} at the end).\n\n" + as_markdown(printed))


@contextlib.contextmanager
def recorded(script: str, out_dir: Path = TABLES, args: list[str] | None = None):
    """Tee stdout while the block runs; on success write it to `out_dir/<script>.md` (not when
    REPORTGEN_BENCH_DOCS=0: a script run by another one, which records the result itself)."""
    if os.environ.get("REPORTGEN_BENCH_DOCS") == "0":
        yield sys.stdout
        return
    load = _load()
    tee = _Tee(sys.stdout)
    with contextlib.redirect_stdout(tee):
        yield tee
    out_dir.mkdir(parents=True, exist_ok=True)
    text = page(script, sys.argv[1:] if args is None else args, tee.text.getvalue(), load,
                _load(), datetime.date.today())
    (out_dir / f"{script}.md").write_text(text, encoding="utf-8")
    print(f"(tables written to {out_dir / f'{script}.md'})", file=sys.stderr)
