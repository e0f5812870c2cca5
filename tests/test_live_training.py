"""The live training view of `reportgen serve` (reportgen.commands.live_training): what a model
folder holds now, answered at /_live/NAME.json with the curves the built page draws (the same
code), nothing outside the models folder, and in Chromium a served overview that shows each
step a real `reportgen train` saves within 5 s, without a build."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from reportgen.commands.live_training import live_record
from reportgen.pages.charts import history_charts


def _folder(root: Path, name: str, records: list[dict]) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "params.toml").write_text("# a model folder\n")
    (folder / "history.json").write_text(json.dumps({"records": records}))
    return folder


RECORDS = [{"step": "0-0", "images_seen": 0, "val_accuracy": 0.1},
           {"step": "1-2", "images_seen": 20, "loss": 0.5, "val_accuracy": 0.4},
           {"step": "1-4", "images_seen": 40, "loss": 0.3, "val_accuracy": 0.7}]


def test_the_record_is_the_folder_now_with_the_built_pages_curves(tmp_path):
    folder = _folder(tmp_path, "M", RECORDS)
    (folder / "1-4.weights.h5").write_bytes(b"")
    record = live_record(tmp_path, "M", classes=3, labels_per_image=1)
    assert record["records"] == 3 and record["steps"] == ["1-4"]
    assert record["latest"] == {"step": "1-4", "val_accuracy": 0.7, "images_seen": 40}
    assert record["charts"] == history_charts(RECORDS, 3, 1, None)
    accuracy = record["charts"][1]["spec"]
    assert [r["value"] for r in accuracy["data"]["values"]
            if r["series"].startswith("val")] == [0.1, 0.4, 0.7]
    two = live_record(tmp_path, "M", classes=10, labels_per_image=2)["charts"][1]
    assert two["label"] == "Top-2 accuracy over training"     # 1/45 chance, as the page's


def test_only_a_model_folder_of_the_models_root_answers(tmp_path):
    _folder(tmp_path / "models", "M", RECORDS)
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "params.toml").write_text("")
    root = tmp_path / "models"
    for name in ("..", ".", "../secret", "M/../../secret", "Missing", ""):
        assert live_record(root, name) is None, name
    (root / "Bad").mkdir()
    (root / "Bad" / "params.toml").write_text("")
    (root / "Bad" / "history.json").write_text("{not json")
    record = live_record(root, "Bad")
    assert "history.json" in record["error"]


def test_serve_answers_the_record_and_404_elsewhere(tmp_path):
    from browser_support import _running
    from reportgen.commands.serve_cli import make_server

    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text("<p>site</p>")
    _folder(tmp_path / "models", "M M", RECORDS)
    server = make_server(site, "127.0.0.1", 0, quiet=True, models_dir=tmp_path / "models")
    with _running(server) as url:
        # the pages ask only a server that says it answers (its cookie)
        with urllib.request.urlopen(url) as answer:
            assert "reportgen-live=1" in answer.headers["Set-Cookie"]
        with urllib.request.urlopen(f"{url}_live/M%20M.json?classes=3") as answer:
            got = json.loads(answer.read())
        assert got == json.loads(json.dumps(live_record(tmp_path / "models", "M M", 3)))
        for path in ("_live/Missing.json", "_live/..%2Fsite.json", "_live/%2e%2e.json"):
            with pytest.raises(urllib.error.HTTPError) as info:
                urllib.request.urlopen(url + path)
            assert info.value.code == 404, path
            info.value.close()
    bare = make_server(site, "127.0.0.1", 0, quiet=True)      # no models folder: no live view
    with _running(bare) as url, pytest.raises(urllib.error.HTTPError) as info:
        with urllib.request.urlopen(url) as answer:
            assert answer.headers["Set-Cookie"] is None
        urllib.request.urlopen(f"{url}_live/M%20M.json")
    assert info.value.code == 404
    info.value.close()


@pytest.mark.slow
@pytest.mark.browser
def test_a_served_overview_shows_each_step_a_running_train_saves_within_5_s(tmp_path_factory):
    import subprocess
    import sys

    from browser_support import CHROMIUM, _running, chromium
    from reportgen.catalog import Catalog
    from reportgen.commands.build import BuildOptions, build
    from reportgen.commands.serve_cli import make_server
    from trained_tiny import copy_trained_tiny

    if CHROMIUM is None:
        pytest.skip("Chromium is not installed")
    home = tmp_path_factory.mktemp("live")
    models = home / "models"
    folder = copy_trained_tiny(tmp_path_factory, models / "Tiny")
    assert build(Catalog(models), BuildOptions(models="Tiny", cache_dir=str(home / "cache"),
                                               site_dir=str(home / "site"), steps="last",
                                               images="test:0-1", analyses="none")).ok
    built = len(json.loads((folder / "history.json").read_text())["records"])
    server = make_server(home / "site", "127.0.0.1", 0, quiet=True, models_dir=models)
    seen: dict[str, float] = {}
    with _running(server) as url, chromium() as browser, (home / "train.err").open("wb") as err:
        page = browser.new_page()
        page.goto(url + "models/Tiny/index.html")
        note = page.locator("[data-rg-live-training]")
        assert note.is_hidden()                               # nothing newer than the build
        train = subprocess.Popen([sys.executable, "-m", "reportgen", "--models-dir",
                                  str(models), "train", "Tiny", "--epochs", "4", "--resume"],
                                 cwd=home, stdout=subprocess.DEVNULL,
                                 stderr=err)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            step = note.get_attribute("data-rg-live-step") if note.is_visible() else None
            if step and step not in seen:
                seen[step] = time.time()
            if train.poll() is not None and len(seen) >= 2 and \
                    step == json.loads((folder / "history.json").read_text())["records"][-1]["step"]:
                break
            time.sleep(0.2)
        assert train.wait(timeout=60) == 0, (home / "train.err").read_text()[-2000:]
        text = note.text_content()
        series = page.evaluate("""() => Array.from(document.querySelectorAll(
            '[data-rg-charts] svg')).length""")
    records = json.loads((folder / "history.json").read_text())["records"]
    saved = {r["step"]: r for r in records[built:]}
    assert len(saved) >= 2 and set(seen) <= set(saved)
    # each step the page showed, within 5 s of the save of the history that holds it (the
    # weights file's time: it is written just before its record is committed)
    for step, when in seen.items():
        written = (folder / f"{step}.weights.h5").stat().st_mtime
        assert when - written <= 5.0, (step, when - written)
    assert records[-1]["step"] in seen and f"{len(saved)} saved steps" in text
    assert series >= 2                                        # the curves redrawn, not gone
