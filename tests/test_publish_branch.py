"""`reportgen publish` keeps the branch's own files: the site goes over the branch's tree and
only what reportgen published there before is replaced or removed (a marker file in the
published tree lists it), also after someone else's commit on top; a site file that would
overwrite a file reportgen did not publish is refused, the branch untouched. `--docs-dir`
takes only a folder MkDocs built, never the analysis site."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from click.testing import CliRunner

from reportgen.cli import main

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

OWN = {"CNAME": "capsules.example.org\n", "README.md": "# my pages\n",
       "notes/index.html": "<p>my notes</p>"}


def _git(*args, cwd=None):
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout


def _site(path, pages):
    """A folder of pages as `reportgen build` leaves it, with its site marker."""
    from reportgen.pages.site_files import write_marker

    shutil.rmtree(path, ignore_errors=True)
    for name, text in pages.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    write_marker(path)
    return path


def _remote_with(tmp_path, files):
    """A bare remote whose gh-pages branch holds `files`, committed by its owner."""
    bare, clone = tmp_path / "remote.git", tmp_path / "clone"
    _git("init", "-q", "--bare", str(bare))
    _git("init", "-q", "-b", "gh-pages", str(clone))
    _commit(clone, files, "the owner's pages")
    _git("push", "-q", str(bare), "gh-pages", cwd=clone)
    return bare, clone


def _commit(clone, files, message):
    for name, text in files.items():
        (clone / name).parent.mkdir(parents=True, exist_ok=True)
        (clone / name).write_text(text)
    _git("add", "-A", cwd=clone)
    _git("-c", "user.name=owner", "-c", "user.email=o@x", "commit", "-q", "-m", message,
         cwd=clone)


def _publish(site, bare, *extra):
    return CliRunner().invoke(main, ["publish", "--site-dir", str(site), "--remote-url",
                                     str(bare), *extra])


def _files(bare):
    return set(_git("--git-dir", str(bare), "ls-tree", "-r", "--name-only", "gh-pages").split())


def _show(bare, name):
    return _git("--git-dir", str(bare), "show", f"gh-pages:{name}")


def test_publish_keeps_the_branch_files_over_two_publishes_and_a_commit_on_top(
        tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    bare, clone = _remote_with(tmp_path, OWN)
    site = _site(tmp_path / "site", {"index.html": "v1", "models/A/conv.html": "a",
                                     "old.html": "old"})
    result = _publish(site, bare, "-m", "first")
    assert result.exit_code == 0, result.output
    files = _files(bare)
    assert set(OWN) <= files and {"index.html", "models/A/conv.html", "old.html",
                                  ".nojekyll", ".reportgen-published.json"} <= files
    assert all(_show(bare, name) == text for name, text in OWN.items())
    listed = _show(bare, ".reportgen-published.json")
    assert "CNAME" not in listed and "old.html" in listed
    # GitHub's "Create CNAME" (here: another domain) and a new page of the owner's, on top
    _git("pull", "-q", str(bare), "gh-pages", cwd=clone)
    _commit(clone, {"CNAME": "capsnets.example.org\n", "notes/more.html": "more"},
            "Create CNAME")
    _git("push", "-q", str(bare), "gh-pages", cwd=clone)
    # the second site: old.html is gone, index.html changed, a new model
    site = _site(site, {"index.html": "v2", "models/A/conv.html": "a", "models/B/x.html": "b"})
    result = _publish(site, bare, "-m", "second")
    assert result.exit_code == 0, result.output
    files = _files(bare)
    assert "old.html" not in files                        # reportgen's, no longer produced
    assert {"models/B/x.html", "notes/more.html"} <= files
    assert _show(bare, "index.html") == "v2"
    assert _show(bare, "CNAME") == "capsnets.example.org\n"
    assert _show(bare, "README.md") == OWN["README.md"]
    assert _show(bare, "notes/index.html") == OWN["notes/index.html"]
    log = _git("--git-dir", str(bare), "log", "--format=%s", "gh-pages").split("\n")[:3]
    assert log == ["second", "Create CNAME", "first"]
    # the same site again: nothing to push
    result = _publish(site, bare)
    assert result.exit_code == 0 and "unchanged" in result.output


def test_publish_refuses_to_overwrite_a_page_it_did_not_publish(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    bare, _ = _remote_with(tmp_path, {**OWN, "index.html": "the owner's home page",
                                      "models": "a file where the site has a folder",
                                      ".nojekyll": ""})      # the same bytes: no conflict
    tip = _git("--git-dir", str(bare), "rev-parse", "gh-pages")
    site = _site(tmp_path / "site", {"index.html": "site", "models/A/conv.html": "a"})
    result = _publish(site, bare)
    assert result.exit_code == 2
    line = result.output.strip()
    assert "\n" not in line and "index.html" in line and "models" in line
    assert "2 file(s)" in line and ".nojekyll" not in line
    assert "--replace" in line
    assert _git("--git-dir", str(bare), "rev-parse", "gh-pages") == tip     # untouched
    # --replace names what the site may take; the rest stays
    result = _publish(site, bare, "--replace", "index.html", "--replace", "models")
    assert result.exit_code == 0, result.output
    assert _show(bare, "index.html") == "site"
    assert set(OWN) | {"models/A/conv.html"} <= _files(bare)
    # publish leaves no working folder behind
    assert list((tmp_path / ".reportgen" / "publish").iterdir()) == []


def _mkdocs_build(path, extra=()):
    for name in ("index.html", "404.html", "sitemap.xml", "sitemap.xml.gz",
                 "search/search_index.json", "assets/app.min.js", "assets/app.min.js.map",
                 "css/x.css", "objects.inv", "img/logo.png", *extra):
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text("x")
    return path


@pytest.mark.parametrize("foreign", ["secrets.env", ".env", "assets/.token", "notes.txt",
                                     "backup.tar.gz", "credentials.json"])
def test_docs_dir_refuses_files_mkdocs_does_not_write(tmp_path, monkeypatch, foreign):
    from reportgen.commands.publish_docs import check_docs_dir

    site = _site(tmp_path / "site", {"index.html": "site"})
    docs = _mkdocs_build(tmp_path / "docs-site", extra=[foreign])
    bare = tmp_path / "remote.git"
    _git("init", "-q", "--bare", str(bare))
    monkeypatch.chdir(tmp_path)
    result = _publish(site, bare, "--docs-dir", str(docs))
    assert result.exit_code == 2 and foreign in result.output, result.output
    assert _git("--git-dir", str(bare), "branch", "--list") == ""           # nothing pushed
    (docs / foreign).unlink()
    assert check_docs_dir(docs, site)[0] == docs.resolve()


def test_docs_dir_must_be_a_mkdocs_build_and_never_the_site(tmp_path, monkeypatch):
    site = _site(tmp_path / "site", {"index.html": "site"})
    bare = tmp_path / "remote.git"
    _git("init", "-q", "--bare", str(bare))
    monkeypatch.chdir(tmp_path)
    result = _publish(site, bare, "--docs-dir", str(site))
    assert result.exit_code == 2 and "is the analysis site" in result.output
    copy = tmp_path / "copy"
    shutil.copytree(site, copy)              # a copy of the site: its marker says what it is
    result = _publish(site, bare, "--docs-dir", str(copy))
    assert result.exit_code == 2 and "is the analysis site" in result.output
    only_index = tmp_path / "only-index"
    only_index.mkdir()
    (only_index / "index.html").write_text("x")
    result = _publish(site, bare, "--docs-dir", str(only_index))
    assert result.exit_code == 2 and "sitemap.xml" in result.output
    docs = _mkdocs_build(tmp_path / "docs-site")
    result = _publish(site, bare, "--docs-dir", str(docs))
    assert result.exit_code == 0, result.output
    assert "under docs/: 10 files: 404.html, assets/, css/, img/, index.html, objects.inv " \
           "and 3 more" in result.output
    assert "docs/search/search_index.json" in _files(bare)


def test_a_branch_an_older_reportgen_published_is_read_through_its_site_marker(
        tmp_path, monkeypatch):
    """Before the list of published paths, a publish left the site's own marker on the
    branch: its files are reportgen's, the rest the owner's."""
    monkeypatch.chdir(tmp_path)
    old = _site(tmp_path / "old", {"index.html": "old", "gone.html": "gone"})
    files = {p.relative_to(old).as_posix(): p.read_text() for p in old.rglob("*")
             if p.is_file()}
    bare, _ = _remote_with(tmp_path, {**OWN, **files, ".nojekyll": ""})
    site = _site(tmp_path / "site", {"index.html": "new"})
    result = _publish(site, bare)
    assert result.exit_code == 0, result.output
    files = _files(bare)
    assert "gone.html" not in files and set(OWN) <= files
    assert _show(bare, "index.html") == "new"


def test_a_killed_publishs_working_folder_is_removed_by_the_next(tmp_path, monkeypatch):
    """publish works in .reportgen/publish/ID/ (locked while it runs, removed at its end):
    what a kill -9 left there goes at the next publish; nothing goes to the temp folder."""
    import tempfile

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    tempfile.tempdir = None                     # read TMPDIR again
    try:
        root = tmp_path / ".reportgen" / "publish"
        (root / "999-deadbeef" / "repo").mkdir(parents=True)
        (root / "999-deadbeef.lock").write_text("999 elsewhere\n")     # nobody holds it
        bare = tmp_path / "remote.git"
        _git("init", "-q", "--bare", str(bare))
        result = _publish(_site(tmp_path / "site", {"index.html": "x"}), bare)
        assert result.exit_code == 0, result.output
        assert list(root.iterdir()) == []
        assert list((tmp_path / "tmp").iterdir()) == []
    finally:
        tempfile.tempdir = None
