"""The site folder's marker lists what reportgen wrote, so files a user adds later are theirs."""

from __future__ import annotations

import pytest

from reportgen.errors import ReportgenError
from reportgen.pages.site_output import check_replaceable, read_marker, staged_site


def _make_site(site):
    with staged_site(site) as staging:
        (staging / "index.html").write_text("<html></html>")
        (staging / "artifacts").mkdir()
        (staging / "artifacts" / "a.png").write_bytes(b"png")


def test_marker_lists_every_file_reportgen_wrote(tmp_path):
    site = tmp_path / "site"
    _make_site(site)
    assert read_marker(site)["files"] == ["artifacts/a.png", "index.html"]


def test_a_file_added_to_a_built_site_is_never_replaced(tmp_path):
    site = tmp_path / "site"
    _make_site(site)
    (site / "CNAME").write_text("example.org\n")
    with pytest.raises(ReportgenError) as err:
        check_replaceable(site)
    assert "CNAME" in err.value.message and "\n" not in err.value.message
    with pytest.raises(ReportgenError):       # a whole build refuses before touching the site
        _make_site(site)
    assert (site / "CNAME").read_text() == "example.org\n"
    assert (site / "artifacts" / "a.png").read_bytes() == b"png"


def test_a_file_removed_from_a_built_site_does_not_block_the_next_build(tmp_path):
    site = tmp_path / "site"
    _make_site(site)
    (site / "artifacts" / "a.png").unlink()
    assert check_replaceable(site) == site.resolve()
    _make_site(site)
    assert (site / "artifacts" / "a.png").read_bytes() == b"png"
