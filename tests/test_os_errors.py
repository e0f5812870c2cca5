"""A write the operating system refuses is one line with the fix for what happened: a
command's "free space on that disk" fix is said for a full disk only, never for a denied
permission or a read-only file system (an `export --out` into a folder the user may not write
said "free space")."""

from __future__ import annotations

import errno

from reportgen.os_errors import user_error

FIX = "free space on that disk, or choose an --out on another disk"


def _error(code: int) -> OSError:
    return OSError(code, "refused", "/papers/locked/supplement.zip")


def test_the_commands_fix_is_for_a_full_disk_only():
    full = user_error(_error(errno.ENOSPC), 1000, FIX)
    assert full.message.startswith("No space left on the disk to write "
                                   "/papers/locked/supplement.zip") and FIX in full.message
    for code, said, fix in ((errno.EACCES, "permission denied", "permissions"),
                            (errno.EPERM, "permission denied", "permissions"),
                            (errno.EROFS, "the file system is read-only", "writable disk"),
                            (errno.EFBIG, "too large", "ulimit")):
        error = user_error(_error(code), 1000, FIX)
        assert said in error.message and fix in error.message, error.message
        assert "free space" not in error.message
        assert "\n" not in error.message
    assert user_error(_error(errno.ENOENT), 1000, FIX) is None     # not a user's to fix
