"""`--scheduler`: where the steps are computed.

    tcp://HOST:8786   a running Dask scheduler (dask-jobqueue on Slurm, dask-kubernetes, or
                      `dask scheduler` + `dask worker` by hand)
    local:N           a LocalCluster of N worker processes on this machine
    (none)            in-process, as without a cluster
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

from reportgen import console
from reportgen.errors import ReportgenError

_EXPECTED = "tcp://HOST:PORT (a running Dask scheduler) or local:N (N worker processes here)"
CONNECT_TIMEOUT = "20s"


@dataclass(frozen=True)
class SchedulerSpec:
    kind: str              # tcp | local
    address: str = ""      # tcp://host:port, tls://…
    workers: int = 0       # local:N


def parse_scheduler(text: str) -> SchedulerSpec:
    """The parsed --scheduler; a one-line ReportgenError for anything else."""
    value = str(text).strip()
    if value.startswith("local:"):
        count = value[len("local:"):]
        if count.isdigit() and int(count) >= 1:
            return SchedulerSpec("local", workers=int(count))
        raise ReportgenError("Invalid --scheduler.", expected="local:N with N >= 1",
                             received=repr(value))
    if value.split("://", 1)[0] in ("tcp", "tls", "ucx", "inproc") and "://" in value \
            and value.split("://", 1)[1]:
        return SchedulerSpec("tcp", address=value)
    raise ReportgenError("Invalid --scheduler.", expected=_EXPECTED, received=repr(value))


def _import_distributed():
    try:
        import distributed
    except ImportError as exc:
        raise ReportgenError("--scheduler needs Dask's distributed scheduler, which is not "
                             "installed", received=str(exc),
                             fix="pip install 'dask[distributed]'") from exc
    return distributed


@contextmanager
def open_client(spec: SchedulerSpec) -> Iterator[object]:
    """A distributed.Client on the cluster (a LocalCluster is started here and shut down on
    leaving, Ctrl-C included); the dashboard's address is printed when there is one."""
    distributed = _import_distributed()
    cluster = None
    try:
        if spec.kind == "local":
            console.notice(f"Starting a local Dask cluster of {spec.workers} worker "
                           f"process{'es' * (spec.workers != 1)}.")
            # CRITICAL: a worker's heartbeat that meets the scheduler shutting down logs a
            # traceback at ERROR; failed tasks reach the user through their results
            cluster = distributed.LocalCluster(
                n_workers=spec.workers, threads_per_worker=1, processes=True,
                dashboard_address=":0", silence_logs=logging.CRITICAL)
            client = distributed.Client(cluster)
        else:
            try:
                client = distributed.Client(spec.address, timeout=CONNECT_TIMEOUT,
                                            )
            except (OSError, TimeoutError) as exc:
                raise ReportgenError(f"Cannot reach the Dask scheduler at {spec.address}",
                                     received=" ".join(str(exc).split())[:200],
                                     fix="start it (`dask scheduler`) and its workers, or "
                                         "check the address") from exc
    except BaseException:
        if cluster is not None:
            cluster.close()
        raise
    try:
        info = client.scheduler_info()
        workers = len(info.get("workers", {}))
        console.notice(f"Dask scheduler {info.get('address', spec.address)}: {workers} "
                       f"worker{'s' * (workers != 1)}.")
        if "dashboard" in info.get("services", {}):
            console.notice(f"Dask dashboard: {client.dashboard_link}")
        yield client
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
