"""`reportgen serve` as a real process answers like GitHub Pages: a missing path at any depth,
and a folder without an index.html, get the site's own 404.html with status 404 (which finds
the site's root itself: tests/test_browser.py opens it in Chromium)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from site_fixture import build_fixture_site

pytestmark = [pytest.mark.faults, pytest.mark.slow]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    site = build_fixture_site(tmp_path_factory.mktemp("serve"))[2]
    process = subprocess.Popen([sys.executable, "-m", "reportgen", "serve", "--site-dir",
                                str(site), "--port", "0"], stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        line = process.stderr.readline()
        url = re.search(r"at (http://\S+/) ", line).group(1)
        yield site, url
    finally:
        process.terminate()
        process.communicate(timeout=30)


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


@pytest.mark.parametrize("missing", ["gone.html", "models/MNIST_Demo/gone/deeper/page.html",
                                     "models/", "assets/", "index%00.html", "a%00/b"])
def test_a_missing_page_gets_the_sites_404_page(served, missing):
    site, url = served
    status, body = _get(url + missing)
    # the site's own page, pinned to the root it is served from (its links then resolve
    # at any depth without a failed request)
    from reportgen.pages.not_found_page import with_base

    own = with_base((site / "404.html").read_text(encoding="utf-8"), "/").encode("utf-8")
    assert status == 404 and body == own and b'<base href="/">' in body


def test_a_path_no_file_can_have_leaves_no_traceback(served):
    """%00 (a NUL byte) answered 404 with the site's page, not an empty reply and a traceback
    in the server's log."""
    site, url = served
    assert _get(url + "x%00y")[0] == 404
    assert _get(url)[0] == 200                      # the server still answers


def test_pages_are_served(served):
    site, url = served
    assert _get(url) == (200, (site / "index.html").read_bytes())
