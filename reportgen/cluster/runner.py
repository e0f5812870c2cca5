"""The client's side of a cluster build: plan every (model, step) from the parameter files and
the store, send one task per step with something missing (nothing for what is stored), and
follow them with one progress bar; the build then assembles the site from the store.

What the steps' tasks report is kept per (model, step) for the build's summary: how many
results the cluster computed, and the failures — a user error once with its (model, step),
never retried; a StoreError stops the whole build; Ctrl-C cancels the cluster's work.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from reportgen import console
from reportgen.cluster.scheduler import open_client, parse_scheduler
from reportgen.cluster.tasks import StepTask, run_step
from reportgen.errors import ReportgenError, StoreError


@dataclass
class TaskReport:
    model: str
    step: str
    seconds: float = 0.0
    computed: int = 0
    worker: str = ""
    error: str | None = None


def check_store_for_cluster(store) -> None:
    """A store cluster workers cannot write into (memory://) is refused in one line."""
    from reportgen.cache.backends import shared_between_processes

    if not shared_between_processes(store):
        raise ReportgenError(f"The artifact store {store.location} lives in this process "
                             f"only; cluster workers cannot write into it",
                             fix="pass --cache-dir a folder every worker sees, or a URL "
                                 "such as s3://bucket/prefix")


@dataclass
class ClusterCompute:
    """One build's use of the cluster."""

    client: object
    store: object
    reports: dict[tuple[str, str], TaskReport] = field(default_factory=dict)
    wall_seconds: float = 0.0          # from the first task sent to the last one finished

    @classmethod
    @contextmanager
    def open(cls, scheduler: str, store) -> Iterator[ClusterCompute]:
        spec = parse_scheduler(scheduler)
        check_store_for_cluster(store)
        with open_client(spec) as client:
            yield cls(client, store)

    # -- the plan and the tasks -----------------------------------------------------------------
    def compute(self, build, entries) -> None:
        """Compute on the cluster every missing result of `build`'s models and steps."""
        from reportgen.cache.backends import location_of

        planned = []                     # (task, model's shared-data key)
        shared = {}
        for entry in entries:
            try:
                prepared = build.prepare(entry)
            except (ReportgenError, Exception):   # reported when the build reaches the model
                continue
            if prepared is None:
                continue
            for step in prepared.steps:
                keys = build.keys(entry, prepared, step)
                if not _missing(keys, self.store):
                    continue
                if entry.name not in shared:
                    shared[entry.name] = (list(prepared.inputs),
                                          prepared.evaluation.as_tuple())
                planned.append(StepTask(
                    model=entry.name, step=str(step), params=entry.params,
                    weights=str(Path(entry.weights_path(step)).absolute()),
                    variants=tuple((t.name, p) for t, p in prepared.chosen.variants), keys=keys,
                    store=location_of(self.store), batch_size=prepared.batch))
        if not planned:
            console.notice("Nothing to compute on the cluster: every result is stored.")
            return
        self._run(planned, shared)
        refresh = getattr(self.store, "refresh", None)
        if callable(refresh):
            refresh()

    def _run(self, planned: list[StepTask], shared: dict) -> None:
        from distributed import as_completed

        client = self.client
        start = time.perf_counter()
        data = {name: client.scatter(value, broadcast=False, hash=False)
                for name, value in shared.items()}
        futures = {}
        for order, task in enumerate(planned):
            future = client.submit(run_step, task, data[task.model], pure=False, retries=0,
                                   key=f"reportgen-{task.model}-{task.step}-{order}",
                                   priority=-order)
            futures[future] = task
        totals: dict[str, list[int]] = {}
        for task in planned:
            totals.setdefault(task.model, [0, 0])[1] += 1
        try:
            with console.progress(len(planned), "build on the cluster", unit="step") as bar:
                for future in as_completed(futures):
                    task = futures[future]
                    self._collect(task, future)
                    totals[task.model][0] += 1
                    bar.update(1)
                    bar.set_postfix_str(" · ".join(f"{m} {done}/{n}"
                                                   for m, (done, n) in totals.items()))
        except BaseException:           # Ctrl-C, or a StoreError: stop the cluster's work
            client.cancel(list(futures), force=True)
            raise
        self.wall_seconds = time.perf_counter() - start

    def _collect(self, task: StepTask, future) -> None:
        report = TaskReport(task.model, task.step)
        self.reports[(task.model, task.step)] = report
        try:
            outcome = future.result()
        except Exception as exc:        # e.g. KilledWorker: its workers died every time
            report.error = " ".join(f"{type(exc).__name__}: {exc}".split())
            return
        if "error" in outcome:
            if outcome["kind"] == "store":
                raise StoreError(outcome["error"])
            report.error = outcome["error"]
            return
        report.seconds, report.computed = outcome["seconds"], outcome["computed"]
        report.worker = outcome["worker"]
        for line in outcome["notices"]:
            console.notice(line)

    # -- what the build reads back --------------------------------------------------------------
    def computed(self, model: str, step) -> int:
        """Results the cluster computed for (model, step); raises the step's failure."""
        report = self.reports.get((model, str(step)))
        if report is None:
            return 0
        if report.error is not None:
            raise ReportgenError(report.error)
        return report.computed


def _missing(keys, store) -> bool:
    groups = (keys.inputs.values(), keys.checkpoint.values(), keys.dataset.values())
    return not store.has_arrays(keys.evaluation) or any(
        not store.has_arrays(key) for group in groups for key in group)
