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
# An unreachable scheduler is said within this many seconds (a scheduler answers at once).
CONNECT_SECONDS = 3


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


def _unreachable(address: str, why: str) -> ReportgenError:
    return ReportgenError(f"Cannot reach the Dask scheduler at {address}", received=why[:200],
                          fix="start it (`dask scheduler`) and its workers, or check the "
                              "address")


def _host_port(address: str) -> tuple[str, int] | None:
    """(host, port) of a tcp:// or tls:// address (Dask's default port 8786), else None."""
    protocol, _, rest = address.partition("://")
    if protocol not in ("tcp", "tls"):
        return None
    host, _, port = rest.rstrip("/").rpartition(":")
    if not host or not port.isdigit():
        host, port = rest.rstrip("/"), "8786"
    return host.strip("[]"), int(port)


def _connect(distributed, address: str):
    """A Client of the scheduler at `address`, or a one-line error within CONNECT_SECONDS.
    Dask's own connection waits without end for a server that accepts connections and never
    answers, so a plain TCP connection comes first: a Dask scheduler sends its handshake as
    soon as it accepts one (distributed.comm.core.Listener.on_connection), so no byte within
    CONNECT_SECONDS is no scheduler. Dask's handshake then also refuses a server that answers
    otherwise."""
    target = _host_port(address)
    if target is not None:
        _probe(address, *target)
    try:
        return distributed.Client(address, timeout=f"{CONNECT_SECONDS}s")
    except Exception as exc:  # noqa: BLE001 - a timeout, or an answer that is not Dask's
        why = " ".join(str(exc).split())
        if not isinstance(exc, (OSError, TimeoutError)):
            why = f"it does not answer as a Dask scheduler ({type(exc).__name__}: {why})"
        raise _unreachable(address, why) from None


def _probe(address: str, host: str, port: int) -> None:
    import socket

    try:
        with socket.create_connection((host, port), timeout=CONNECT_SECONDS) as sock:
            if address.startswith("tcp://"):      # TLS speaks first from the client's side
                if not sock.recv(1):
                    raise _unreachable(address, "it closed the connection at once")
    except socket.timeout:
        raise _unreachable(address, f"nothing answered within {CONNECT_SECONDS} s") from None
    except OSError as exc:
        raise _unreachable(address, exc.strerror or str(exc) or type(exc).__name__) from None


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
            client = _connect(distributed, spec.address)
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
