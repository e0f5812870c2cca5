"""Panels drawn ahead in a worker process (reportgen.pages.drawing_pool) give the same site,
byte for byte, as drawing them in the build's own process."""

from __future__ import annotations

import pytest

from reportgen.errors import ReportgenError
from reportgen.pages import drawing_pool
from trained_tiny import copy_trained_tiny


def test_one_worker_where_there_is_a_second_core_unless_the_environment_says(monkeypatch):
    monkeypatch.delenv(drawing_pool.ENVIRONMENT, raising=False)
    monkeypatch.setattr(drawing_pool.os, "cpu_count", lambda: 2)
    assert drawing_pool.processes_for() == 1
    monkeypatch.setattr(drawing_pool.os, "cpu_count", lambda: 1)    # no second core to use
    assert drawing_pool.processes_for() == 0
    monkeypatch.setenv(drawing_pool.ENVIRONMENT, "2")
    assert drawing_pool.processes_for() == 2
    monkeypatch.setenv(drawing_pool.ENVIRONMENT, "0")
    assert drawing_pool.processes_for() == 0
    monkeypatch.setenv(drawing_pool.ENVIRONMENT, "many")
    with pytest.raises(ReportgenError, match=drawing_pool.ENVIRONMENT):
        drawing_pool.processes_for()


def _tree(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.slow
def test_a_site_drawn_ahead_in_a_worker_equals_one_drawn_in_the_build(tmp_path, monkeypatch,
                                                                     tmp_path_factory):
    from reportgen.catalog import Catalog
    from reportgen.commands.build import run_build

    models = tmp_path / "models"
    copy_trained_tiny(tmp_path_factory, models / "Tiny")

    taken = []
    original = drawing_pool.DrawingPool.take

    def take(self, key):
        started = key in self._pending
        figures = original(self, key)
        taken.append((started, figures is not None))
        return figures

    monkeypatch.setattr(drawing_pool.DrawingPool, "take", take)
    from reportgen.commands.build_settings import default_techniques

    def plan(name):
        from reportgen.engine.model import ModelHandle
        from reportgen.engine.step import plan as engine_plan
        from reportgen.techniques import get_technique

        return engine_plan([get_technique(t) for t in default_techniques()],
                           ModelHandle(Catalog(models).get(name).params)).variants

    from reportgen.techniques import get_technique

    dataset = tuple(name for name in default_techniques()
                    if get_technique(name).scope == "dataset")
    sites = {}
    for processes in ("1", "0"):
        monkeypatch.setenv(drawing_pool.ENVIRONMENT, processes)
        project = tmp_path / f"project-{processes}"
        project.mkdir()
        monkeypatch.chdir(project)
        # every dataset analysis (the panels the worker draws), no inputs: a shorter test
        summary = run_build(models_dir=models, models="Tiny", steps="last", images="none",
                            techniques=dataset, analyses="last", eval_images=12,
                            site_dir="site", cache_dir=str(project / "cache"))
        assert summary.ok
        sites[processes] = _tree(project / "site")
        if processes == "1":      # panels drawn ahead: taken from the worker, or withdrawn
            analyses = sum(t.scope == "dataset" for t, _ in plan("Tiny"))
            assert sum(started for started, _ in taken) >= 2 * analyses
            assert any(got for _, got in taken), "the worker drew nothing"
            taken.clear()
    assert not any(started for started, _ in taken)     # no worker: nothing drawn ahead
    assert sites["1"].keys() == sites["0"].keys()
    different = [name for name in sites["1"] if sites["1"][name] != sites["0"][name]]
    assert different == []
