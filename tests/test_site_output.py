"""The site folder's marker lists what reportgen wrote, each file with its sha256: a folder
holding anything else (at any depth), or whose marker lists nothing, is never replaced; an old
site is removed file by file from its list; a deleted or edited file makes the site out of
date; the digest of what the pages are made from depends on content only."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from reportgen.errors import ReportgenError
from reportgen.pages import site_output
from reportgen.pages.site_files import (MARKER, changed_files, inventory, read_marker, shown,
                                        unknown_entries, write_marker)
from reportgen.pages.site_output import SiteLock, check_replaceable, staged_site

PAGES = {"index.html": b"<html>home</html>", "artifacts/M/1-5/a.png": b"png a",
         "artifacts/M/1-5/b.svg": b"<svg/>", "models/M/index.html": b"<html>M</html>",
         "assets/reportgen/reportgen.js": b"// js"}


def _make_site(site, pages=PAGES, marker=None):
    with staged_site(site, marker) as staging:
        for name, data in pages.items():
            (staging / name).parent.mkdir(parents=True, exist_ok=True)
            (staging / name).write_bytes(data)
        (staging / "artifacts" / "empty").mkdir(parents=True)   # a static site needs none


def _tree(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _refusal(site) -> str:
    with pytest.raises(ReportgenError) as err:
        check_replaceable(site, "site")
    message = err.value.message
    assert "\n" not in message and message.startswith("Refusing to write the site into 'site'")
    assert "Fix: " in message and "--site-dir" in message.split("Fix: ")[1]
    return message


# ------------------------------------------------------------------ the list


def test_marker_lists_every_file_with_its_sha256(tmp_path):
    site = tmp_path / "site"
    _make_site(site, marker={"digest": "d"})
    marker = read_marker(site)
    assert marker["digest"] == "d"
    assert marker["files"] == {name: hashlib.sha256(data).hexdigest()
                               for name, data in PAGES.items()}
    assert not (site / "artifacts" / "empty").exists()
    assert _tree(site) == {**PAGES, MARKER: (site / MARKER).read_bytes()}
    # the marker holds nothing of this machine: the same pages elsewhere, the same bytes
    _make_site(tmp_path / "elsewhere" / "other", marker={"digest": "d"})
    assert (tmp_path / "elsewhere" / "other" / MARKER).read_bytes() == (site / MARKER).read_bytes()


def test_inventory_sees_every_depth_and_never_follows_a_link(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "deep.txt").write_text("x")
    (tmp_path / "empty").mkdir()
    (tmp_path / MARKER).write_text("{}")
    (tmp_path / "a" / MARKER).write_text("not the site's marker")
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    (outside / "sub").mkdir(parents=True)
    (outside / "sub" / "theirs.txt").write_text("y")
    (tmp_path / "link").symlink_to(outside, target_is_directory=True)
    assert inventory(tmp_path) == (["a/.reportgen-site.json", "a/b/deep.txt", "link"],
                                   ["a", "a/b", "empty"])


def test_unknown_entries_and_how_they_are_named():
    files = ["index.html", "CNAME", "models/M/notes.md", "models/M/index.html", "x/y.png"]
    folders = ["models", "models/M", "drafts", "x"]
    listed = {"index.html": None, "models/M/index.html": None, "gone/z.png": None}
    # a user's kinds of file first (the order of a message only), then reportgen's kinds
    assert unknown_entries(files, folders, listed) == ["CNAME", "drafts/", "models/M/notes.md",
                                                       "x/y.png"]
    assert unknown_entries(files, folders, {}) == ["CNAME", "drafts/", "models/M/notes.md",
                                                   "index.html", "models/M/index.html", "x/y.png"]
    assert shown(["a", "b"]) == "a, b"
    assert shown([f"f{i}" for i in range(1234)]) == "f0, f1, f2 and 1,231 more"


# ------------------------------------------------------------------ refusals


def test_files_added_at_any_depth_are_named_and_never_replaced(tmp_path):
    site = tmp_path / "site"
    _make_site(site)
    (site / "CNAME").write_text("example.org\n")
    (site / "models" / "M" / "notes.md").write_text("# notes\n")
    (site / "drafts").mkdir()
    before = _tree(site)
    message = _refusal(site)
    assert "did not write (CNAME, drafts/, models/M/notes.md)" in message
    assert "move them out of 'site'" in message
    with pytest.raises(ReportgenError):        # a whole build refuses before touching the site
        _make_site(site)
    assert _tree(site) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]


def test_many_added_files_are_named_a_few_then_how_many_more(tmp_path):
    site = tmp_path / "site"
    _make_site(site)
    for i in range(12):
        (site / "models" / f"thesis-{i:02d}.tex").write_text("\\section{}")
    message = _refusal(site)
    assert "(models/thesis-00.tex, models/thesis-01.tex, models/thesis-02.tex and 9 more)" \
        in message


def test_an_old_marker_without_a_file_list_is_refused_naming_a_users_files_first(tmp_path):
    site = tmp_path / "site"
    _make_site(site)
    (site / MARKER).write_text(json.dumps({"generator": "reportgen", "digest": "old"}))
    (site / "CNAME").write_text("example.org\n")
    (site / "models" / "notes.md").write_text("# mine\n")
    before = _tree(site)
    message = _refusal(site)
    assert "without listing the files it wrote" in message
    assert "(CNAME, models/notes.md, artifacts/M/1-5/a.png and 4 more)" in message
    assert "or move 'site' away" in message
    with pytest.raises(ReportgenError):
        _make_site(site)
    assert _tree(site) == before


def test_a_site_made_before_the_marker_is_refused_at_any_depth(tmp_path):
    site = tmp_path / "site"
    for name, data in PAGES.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_bytes(data)
    (site / "models" / "thesis.tex").write_text("\\chapter{}")
    before = _tree(site)
    message = _refusal(site)
    assert "older reportgen" in message and "(models/thesis.tex, " in message
    with pytest.raises(ReportgenError):
        _make_site(site)
    assert _tree(site) == before


def test_a_link_in_place_of_a_listed_folder_is_refused(tmp_path):
    site = tmp_path / "site"
    _make_site(site)
    mine = tmp_path / "mine"
    (mine / "M").mkdir(parents=True)
    (mine / "M" / "index.html").write_text("my own page")
    os.rename(site / "models", tmp_path / "moved")
    (site / "models").symlink_to(mine, target_is_directory=True)
    assert "did not write (models)" in _refusal(site)


# ------------------------------------------------------------------ replacing


def test_a_replaced_site_leaves_no_old_file_and_keeps_a_file_added_during_the_build(
        tmp_path, monkeypatch):
    site = tmp_path / "site"
    _make_site(site)
    checked = []
    real_check = site_output.check_replaceable

    def check_then_user_adds_files(folder, label=None):
        result = real_check(folder, label)
        checked.append(folder)
        if len(checked) == 2:       # after the last check, before the swap
            (site / "CNAME").write_text("example.org\n")
            (site / "models" / "notes.md").write_text("# mine\n")
        return result

    monkeypatch.setattr(site_output, "check_replaceable", check_then_user_adds_files)
    _make_site(site, {"index.html": b"new home", "models/N/index.html": b"N"})
    tree = _tree(site)
    assert tree.pop(MARKER)
    assert tree == {"index.html": b"new home", "models/N/index.html": b"N",
                    "CNAME": b"example.org\n", "models/notes.md": b"# mine\n"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]
    monkeypatch.undo()
    assert "(CNAME, models/notes.md)" in _refusal(site)      # the next build names them


def test_a_file_added_over_a_new_sites_file_is_kept_beside_it(tmp_path, monkeypatch):
    site = tmp_path / "site"
    _make_site(site)
    tokens = []
    real_swap = site_output._swap

    def user_adds_a_file_then_swap(new, folder, token, label):
        (site / "models" / "N").mkdir()
        (site / "models" / "N" / "index.html").write_text("mine")
        tokens.append(token)
        real_swap(new, folder, token, label)

    monkeypatch.setattr(site_output, "_swap", user_adds_a_file_then_swap)
    _make_site(site, {"index.html": b"new home", "models/N/index.html": b"N"})
    assert _tree(site)["models/N/index.html"] == b"N"
    kept = tmp_path / f"site.kept-{tokens[0].split('-')[1]}"
    assert _tree(kept) == {"models/N/index.html": b"mine"}


def test_a_deleted_file_does_not_block_the_next_build(tmp_path):
    site = tmp_path / "site"
    _make_site(site)
    (site / "artifacts" / "M" / "1-5" / "a.png").unlink()
    assert check_replaceable(site) == site.resolve()
    _make_site(site)
    assert (site / "artifacts" / "M" / "1-5" / "a.png").read_bytes() == b"png a"


def test_a_hand_edited_list_never_reaches_out_of_the_old_site(tmp_path):
    from reportgen.pages.site_files import remove_listed

    old = tmp_path / "old"
    (old / "sub").mkdir(parents=True)
    (old / "sub" / "ours.png").write_bytes(b"png")
    (tmp_path / "outside.txt").write_text("keep")
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "page.html").write_text("keep too")
    (old / "linked").symlink_to(theirs, target_is_directory=True)
    (old / MARKER).write_text(json.dumps({"generator": "reportgen", "files": {
        "sub/ours.png": "0" * 64, "../outside.txt": "0" * 64, "linked/page.html": "0" * 64}}))
    remove_listed(old)
    assert (tmp_path / "outside.txt").read_text() == "keep"
    assert (theirs / "page.html").read_text() == "keep too"
    assert sorted(p.name for p in old.iterdir()) == ["linked"]    # not on the list: stays


# ------------------------------------------------------------------ what changed


def test_deleted_edited_or_replaced_files_are_found(tmp_path):
    site = tmp_path / "site"
    _make_site(site, marker={"digest": "d"})
    listed = json.loads((site / MARKER).read_text())["files"]
    assert changed_files(site, listed) == []
    (site / "artifacts" / "M" / "1-5" / "a.png").unlink()
    (site / "index.html").write_bytes(b"<html>edited</html>")
    (site / "models" / "M" / "index.html").unlink()
    (site / "models" / "M" / "index.html").symlink_to(tmp_path / "x")
    assert changed_files(site, listed) == ["artifacts/M/1-5/a.png", "index.html",
                                           "models/M/index.html"]
    # a list without digests proves nothing about the files' bytes
    assert changed_files(site, dict.fromkeys(listed)) == sorted(listed)


def test_a_site_is_up_to_date_only_with_every_file_as_written(tmp_path, capsys):
    from reportgen.commands.site_changes import is_up_to_date

    site = tmp_path / "site"
    _make_site(site, marker={"digest": "d"})
    assert is_up_to_date(site, "d") and not is_up_to_date(site, "e")
    (site / "artifacts" / "M" / "1-5" / "b.svg").write_bytes(b"<svg>edited</svg>")
    capsys.readouterr()
    assert not is_up_to_date(site, "d")
    assert ("1 file reportgen wrote was deleted or changed since it was built "
            "(artifacts/M/1-5/b.svg); building it again.") in capsys.readouterr().err
    _make_site(site, marker={"digest": "d"})
    marker = json.loads((site / MARKER).read_text())
    marker["files"] = sorted(marker["files"])                 # the list without digests
    (site / MARKER).write_text(json.dumps(marker))
    assert not is_up_to_date(site, "d")


def test_the_pages_digest_depends_on_content_not_on_where_the_cache_is(tmp_path):
    from reportgen.cache.store import ArtifactStore
    from reportgen.commands.site_changes import site_digest
    from reportgen.pages.assemble import Assembler
    from reportgen.pages.sitedata import FigureFile, Panel, SiteData
    from reportgen.techniques.base import Figure

    def digest(cache, caption="Kernels."):
        store = ArtifactStore(tmp_path / cache)
        figures = store.put_figures("ab" * 32, [Figure(name="k.png", data=b"png", kind="png",
                                                       caption=caption)])
        assembler = Assembler(store, tmp_path / f"docs-{cache}")
        assembler._remember(figures)
        panel = Panel(technique="k", variant="", title="K", layer="conv1", caption=caption,
                      figures=[FigureFile("png", "artifacts/k.png", source=figures[0]["path"])])
        site = SiteData(title="t", models=[], techniques=[], compare_panels=[panel])
        return site_digest(site, assembler, None)

    first = digest("cache-a")
    assert digest("somewhere/else/cache-b") == first       # other path, inode and times
    assert digest("cache-c", caption="Other.") != first


# ------------------------------------------------------------------ the folder around it


def test_missing_parent_folders_are_made_and_removed_when_nothing_was_written(tmp_path):
    site = tmp_path / "new" / "deeper" / "site"
    with SiteLock(site, label="new/deeper/site"):
        assert (tmp_path / "new" / "deeper" / ".site.reportgen-lock").is_file()
    assert not (tmp_path / "new").exists()                  # a refused build leaves no trace
    with SiteLock(site, label="new/deeper/site"):
        _make_site(site)
    assert _tree(site)["index.html"] == PAGES["index.html"]
    assert sorted(p.name for p in site.parent.iterdir()) == ["site"]


def test_a_parent_that_is_a_file_is_one_line(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ReportgenError) as err:
        with SiteLock(tmp_path / "notes.txt" / "site", label="notes.txt/site"):
            pass
    message = err.value.message
    assert "\n" not in message and "beside the site folder notes.txt/site/" in message
    assert f"Received {tmp_path / 'notes.txt'} is not a folder" in message
    assert "Fix: choose a --site-dir in a folder you may write to" in message
    assert (tmp_path / "notes.txt").read_text() == "mine"
