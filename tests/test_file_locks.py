"""The locks: the site folder's and the working folders' (filelock.FileLock) and the two kept as
raw flock (reportgen.file_locks: the store's shared lock and the training lock on a folder).
What each must keep: a second holder is refused or waits, a holder that deletes its lock file
hands the lock on to a waiter that then holds the new file, and a holder killed with -9 blocks
nobody."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from reportgen import file_locks
from reportgen.errors import ReportgenError

ROOT = Path(__file__).resolve().parents[1]


def test_shared_holders_share_and_an_exclusive_one_waits_for_them(tmp_path):
    path = tmp_path / "store.lock"
    first = file_locks.acquire(path, exclusive=False, blocking=True)
    second = file_locks.acquire(path, exclusive=False, blocking=False)
    assert first is not None and second is not None
    assert file_locks.acquire(path, exclusive=True, blocking=False) is None
    file_locks.release(first)
    assert file_locks.acquire(path, exclusive=True, blocking=False) is None
    file_locks.release(second)
    alone = file_locks.acquire(path, exclusive=True, blocking=False)
    assert alone is not None
    assert file_locks.acquire(path, exclusive=False, blocking=False) is None
    file_locks.release(alone)


def test_a_waiter_on_a_deleted_lock_file_locks_the_new_one(tmp_path):
    path = tmp_path / "store.lock"
    holder = file_locks.acquire(path, exclusive=True, blocking=True)
    got = []
    waiter = threading.Thread(target=lambda: got.append(
        file_locks.acquire(path, exclusive=True, blocking=True)))
    waiter.start()
    time.sleep(0.2)                     # the waiter has opened the old file and waits on it
    path.unlink()                       # as `cache clear` does, while holding the lock
    file_locks.release(holder)
    waiter.join(10)
    assert file_locks.same_file(got[0], path)      # it holds the file the path names now
    assert file_locks.acquire(path, exclusive=False, blocking=False) is None
    file_locks.release(got[0])


def test_a_folder_lock_refuses_a_second_holder_and_leaves_no_file(tmp_path):
    first = os.open(tmp_path, os.O_RDONLY)
    second = os.open(tmp_path, os.O_RDONLY)
    try:
        assert file_locks.try_lock(first)
        assert not file_locks.try_lock(second)
        assert list(tmp_path.iterdir()) == []
    finally:
        os.close(first)
    assert file_locks.try_lock(second)
    os.close(second)


def test_the_site_lock_hands_on_to_a_waiter_after_deleting_its_file(tmp_path):
    from reportgen.pages.site_output import SiteLock

    site = tmp_path / "site"
    lock_file = tmp_path / ".site.reportgen-lock"
    inside = []

    def waiter():
        with SiteLock(site, label="site"):
            inside.append(lock_file.read_text().split()[0])
            with pytest.raises(ReportgenError, match="Another build is writing site/"):
                with SiteLock(site, wait=False, label="site"):
                    pass

    with SiteLock(site, label="site"):
        thread = threading.Thread(target=waiter)
        thread.start()
        time.sleep(0.3)
        assert inside == []
    thread.join(10)
    assert inside == [str(os.getpid())] and not lock_file.exists()


# Holds a site lock, a working folder and the store's shared lock, then waits to be killed.
HOLDER = """
import sys, time
from pathlib import Path
from reportgen.cache.store import ArtifactStore
from reportgen.commands.work_folder import WorkFolder
from reportgen.pages.site_output import SiteLock

root = Path(sys.argv[1])
with SiteLock(root / "site"), WorkFolder(root / "builds") as work, \\
        ArtifactStore(root / "cache").shared_lock():
    print(work.name, flush=True)
    time.sleep(600)
"""


@pytest.mark.faults
@pytest.mark.slow
def test_locks_of_a_process_killed_with_9_block_nobody(tmp_path):
    from reportgen.cache.store import ArtifactStore
    from reportgen.commands.work_folder import WorkFolder
    from reportgen.pages.site_output import SiteLock

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path)], env=env,
                              stdout=subprocess.PIPE, text=True)
    try:
        dead = holder.stdout.readline().strip()
        assert dead and (tmp_path / "builds" / dead).is_dir()
        with pytest.raises(ReportgenError, match=f"pid {holder.pid}"):
            with SiteLock(tmp_path / "site", wait=False, label="site"):
                pass
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(30)
    finally:
        holder.kill()
        holder.communicate()
    with SiteLock(tmp_path / "site", wait=False, label="site"):
        pass
    with WorkFolder(tmp_path / "builds") as path:        # removes the killed build's folder
        assert sorted(p.name for p in (tmp_path / "builds").iterdir()) == sorted(
            [path.name, f"{path.name}.lock"])
    assert ArtifactStore(tmp_path / "cache").clear(wait=False) >= 0
    assert not (tmp_path / "cache").exists()
