"""What the operating system refuses while reportgen writes (a full disk, a read-only file
system, a denied permission, a file too large) as one-line user errors: the path, what
happened, for a full disk the space needed and free, and the fix; exit 2 (README, "Errors are
one line"). Every other OSError stays what it is: a bug or an environment failure."""

from __future__ import annotations

import errno
from contextlib import contextmanager
from typing import Callable, Iterator

from reportgen.errors import ReportgenError
from reportgen.sizes import free_space, size_text

FULL = frozenset({errno.ENOSPC, errno.EDQUOT})
_DENIED = frozenset({errno.EACCES, errno.EPERM})
DISK_ERRORS = FULL | {errno.EROFS}       # the disk's, not a file's: every write there fails
WRITE_ERRORS = DISK_ERRORS | _DENIED | {errno.EFBIG}


def user_error(exc: OSError, needed: int | None = None, fix: str | None = None,
               path=None) -> ReportgenError | None:
    """The one-line error for `exc` (`needed`: the bytes the command still had to write, when
    it knows them; `fix`: the command's own fix for a full disk, e.g. another --site-dir;
    `path`: where it wrote, for an error that names no file), or None when `exc` is not one a
    user can fix. A read-only file system, a denied permission or a file too large each say
    their own fix (freeing space mends none of them)."""
    if exc.errno not in WRITE_ERRORS:
        return None
    path = exc.filename2 or exc.filename or path      # a copy's or rename's destination
    where = f" {path}" if path else ""
    if exc.errno in FULL:
        free = free_space(path or ".")
        numbers = [f"about {size_text(needed)} needed" if needed else None,
                   None if free is None else f"{size_text(free)} free"]
        said = ", ".join(n for n in numbers if n)
        return ReportgenError(f"No space left on the disk to write{where}"
                              + (f" ({said})" if said else ""),
                              fix=fix or "free space on that disk, or write to another disk")
    if exc.errno == errno.EROFS:
        return ReportgenError(f"Cannot write{where}: the file system is read-only",
                              fix="choose a folder on a writable disk")
    if exc.errno == errno.EFBIG:
        return ReportgenError(f"Cannot write{where}: the file is too large for its file system "
                              f"or for this process's file size limit",
                              fix="write to another disk, or raise the limit (ulimit -f)")
    return ReportgenError(f"Cannot write{where}: permission denied",
                          fix="fix the folder's permissions, or choose one you may write to")


@contextmanager
def said_in_one_line(needed: Callable[[], int | None] | int | None = None,
                     fix: str | None = None, path=None) -> Iterator[None]:
    """Turns a write refused by the operating system inside the block into its one-line
    ReportgenError (see user_error); `needed` (bytes, or a function giving them) is asked only
    then."""
    try:
        yield
    except OSError as exc:
        error = user_error(exc, needed() if callable(needed) else needed, fix, path)
        if error is None:
            raise
        raise error from exc
