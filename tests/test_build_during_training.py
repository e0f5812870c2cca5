"""A build that runs while the model trains charts the history as it was when the build chose
its steps: records a training run writes during the build (steps this build does not show)
stay out of its curves (they appeared past the last built step)."""

from __future__ import annotations

import csv
import io

import pytest

from trained_tiny import copy_trained_tiny


@pytest.mark.slow
def test_records_written_during_the_build_stay_out_of_its_curves(tmp_path, tmp_path_factory,
                                                                monkeypatch):
    from reportgen.catalog import Catalog
    from reportgen.commands.build import BuildOptions, build
    from reportgen.model_folder import ModelFolder

    models = tmp_path / "models"
    copy_trained_tiny(tmp_path_factory, models / "Tiny")
    real = ModelFolder.history
    reads = []

    def training_meanwhile(self):
        records = real(self)
        reads.append(len(records))
        if len(reads) > 1:          # the trainer saved another step after the build started
            late = dict(records[-1], step="9-9", val_accuracy=0.123)
            return [*records, late]
        return records

    monkeypatch.setattr(ModelFolder, "history", training_meanwhile)
    summary = build(Catalog(models), BuildOptions(
        models="Tiny", steps="last", images="test:0", analyses="none",
        techniques=("predictions",), cache_dir=str(tmp_path / "cache"),
        site_dir=str(tmp_path / "site")))
    assert summary.ok, summary.failed
    curves = next((tmp_path / "site").rglob("training_curves.csv"))
    rows = list(csv.DictReader(io.StringIO(curves.read_text())))
    steps = [r.get("step") for r in rows]
    assert steps and "9-9" not in steps, steps
    assert len(steps) == reads[0]
