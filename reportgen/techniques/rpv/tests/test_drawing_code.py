"""RPV's figures are keyed by its own drawing module (reportgen.engine.code_identity): an edit of
reportgen/techniques/rpv/figures.py redraws its figures, keeps its arrays, and redraws no
other technique's figures (Grad-CAM++ draws the same overlays: reportgen/figures/panel_kit.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from reportgen import techniques
from reportgen.engine.code_identity import drawing_code, technique_code

FIGURES = "reportgen.techniques.rpv.figures"


def _codes(*names):
    found = {}
    for name in names:
        technique = techniques.get_technique(name)
        origin = techniques.origin(technique)
        found[name] = (technique_code(technique, origin), drawing_code(technique, origin))
    return found


def test_editing_rpv_s_figures_changes_its_drawing_code_only(tmp_path, monkeypatch):
    rpv = techniques.get_technique("rpv")
    assert rpv.render.lazy_module == FIGURES
    before = _codes("rpv", "gradcam_pp")
    # the file edited, as the next build's process imports it
    import reportgen.techniques.rpv.figures as figures

    edited = tmp_path / "figures.py"
    edited.write_bytes(Path(figures.__file__).read_bytes().replace(
        b'"path strength m"', b'"path strength"'))
    assert edited.read_bytes() != Path(figures.__file__).read_bytes()
    spec = importlib.util.spec_from_file_location(FIGURES, edited)
    monkeypatch.setitem(sys.modules, FIGURES, importlib.util.module_from_spec(spec))
    after = _codes("rpv", "gradcam_pp")
    assert after["rpv"][1] != before["rpv"][1]          # its figures are drawn again
    assert after["rpv"][0] == before["rpv"][0]          # its arrays are kept
    assert after["gradcam_pp"] == before["gradcam_pp"]  # another technique's, untouched
    monkeypatch.undo()
    assert _codes("rpv") == {"rpv": before["rpv"]}
