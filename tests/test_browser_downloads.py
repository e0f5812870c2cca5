"""Every download link of a model's pages resolves to the file it names, in a real browser on a
real build of a tiny model: the overview's training curves and confusion matrices, and every
panel's PNG / SVG / PDF / JSON / CSV on the layer and analyses pages."""

from __future__ import annotations

import pytest

from browser_support import CHROMIUM, chromium, serve
from test_export import built  # noqa: F401  (the module's tiny build)

pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")
pytestmark = [pytest.mark.browser, pytest.mark.slow,
              pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed")]

SIGNATURES = {"png": b"\x89PNG\r\n\x1a\n", "pdf": b"%PDF-", "json": b"{"}


def _links(page, selector: str) -> list[tuple[str, str]]:
    return page.eval_on_selector_all(selector, "els => els.map(a => [a.href, a.textContent])")


def test_every_download_link_of_a_model_resolves(built):  # noqa: F811
    _, _, site, _ = built
    with serve(site) as base, chromium() as browser:
        page = browser.new_page()
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(base + "models/Tiny/index.html")
        overview = _links(page, "a[download]")
        kinds = {text.strip().lower() for _, text in overview}
        assert {"png", "svg", "pdf", "csv"} <= kinds, overview
        assert sum(1 for href, _ in overview if "confusion_matrix.pdf" in href) == 4  # a step each
        assert any("training_curves.pdf" in href for href, _ in overview)
        pages = [base + "models/Tiny/index.html"] + sorted(
            {href for href, _ in _links(page, ".rg-pagelinks a")} - {page.url})
        links = {}
        for url in pages:
            page.goto(url)
            links.update(_links(page, "a[download]"))
        kinds = {text.strip().lower() for text in links.values()}
        assert {"png", "svg", "pdf", "json", "csv"} <= kinds, kinds
        checked = 0
        for href, text in sorted(links.items()):
            response = page.request.get(href)
            assert response.ok, href
            body = response.body()
            kind = text.strip().lower()
            assert href.lower().endswith("." + kind), (href, text)
            assert body.startswith(SIGNATURES.get(kind, b"")) and body, href
            if kind == "svg":
                assert b"<svg" in body[:400], href
            if kind == "csv":
                assert b"," in body.splitlines()[0], href
            checked += 1
        assert checked >= 40
        assert not errors, errors
