"""`reportgen publish`: push the built site to a gh-pages branch (GitHub Pages).

Plain git plumbing (the approach of ghp-import, which MkDocs' gh-deploy uses): the site folder
becomes one commit on top of the remote branch's tip, built with a temporary index so the
user's working tree, index and checked-out branch are never touched, then pushed. A
`.nojekyll` file is added so GitHub Pages serves the files as they are. Unlike ghp-import, the
branch's own files stay: the site is written over the branch's tree and only what reportgen
published there before is replaced or removed (reportgen.commands.publish_branch); a site file
that would overwrite a file reportgen did not publish is refused unless --replace names it.
Nothing is pushed when the site has not changed since the branch's last commit.

Run it inside the project's git repository (the remote's credentials and settings apply); with
--remote-url it also works outside any repository (a temporary one is used). `--docs-dir` adds
reportgen's own built documentation (`mkdocs build`, docs-site/) under `docs/` of the same
commit, beside the analysis site; only a folder MkDocs built is accepted
(reportgen.commands.publish_docs).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import click

from reportgen.errors import ReportgenError


class _Git:
    def __init__(self, git_dir: Path, env: dict | None = None):
        self.git_dir = git_dir
        self.env = {**os.environ, **(env or {})}

    def run(self, *args: str, check: bool = True, input: bytes | None = None,  # noqa: A002
            cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
        result = subprocess.run(["git", f"--git-dir={self.git_dir}", *args], input=input,
                                capture_output=True, cwd=cwd, env={**self.env, **(env or {})})
        if check and result.returncode != 0:
            raise ReportgenError(f"git {args[0]} failed.",
                                 received=result.stderr.decode(errors="replace").strip(),
                                 fix="see git's message above")
        return result

    def out(self, *args: str, **kwargs) -> str:
        return self.run(*args, **kwargs).stdout.decode().strip()


def _find_git_dir(repo_dir: Path) -> Path | None:
    result = subprocess.run(["git", "rev-parse", "--absolute-git-dir"], cwd=repo_dir,
                            capture_output=True)
    return Path(result.stdout.decode().strip()) if result.returncode == 0 else None


def _identity(git: _Git) -> dict:
    """Author/committer for the commit: git's configuration, else a neutral fallback."""
    env = {}
    if git.run("config", "user.name", check=False).returncode != 0:
        env.update(GIT_AUTHOR_NAME="reportgen", GIT_COMMITTER_NAME="reportgen")
    if git.run("config", "user.email", check=False).returncode != 0:
        env.update(GIT_AUTHOR_EMAIL="reportgen@localhost", GIT_COMMITTER_EMAIL="reportgen@localhost")
    return env


def _pin_not_found_page(git: _Git, site: Path, url: str, index_env: dict) -> None:
    """GitHub Pages serves 404.html at the missing URL's path: its links get the site's root
    (reportgen.pages.not_found_page). The site folder itself is left as built."""
    from reportgen.pages import not_found_page

    page = site / not_found_page.NAME
    root = not_found_page.github_pages_root(url, site)
    if root is None or not page.is_file():
        return
    html = not_found_page.with_base(page.read_text(encoding="utf-8"), root)
    blob = git.out("hash-object", "-w", "--stdin", input=html.encode("utf-8"))
    git.run("update-index", "--cacheinfo", f"100644,{blob},{not_found_page.NAME}", env=index_env)


DOCS_PREFIX = "docs"     # where --docs-dir's folder goes in the published tree


def _check_docs_dir(docs_dir: str | Path, site: Path) -> tuple[Path, list[str]]:
    """A MkDocs build to publish under docs/ (reportgen.commands.publish_docs), beside the
    analysis site (which must have no docs/ of its own)."""
    from reportgen.commands.publish_docs import check_docs_dir

    docs = check_docs_dir(docs_dir, site)
    if (site / DOCS_PREFIX).exists():
        raise ReportgenError(f"The site '{site}' already has a '{DOCS_PREFIX}' entry.",
                             expected=f"a site without {DOCS_PREFIX}/, so the docs can go there",
                             received=str(site / DOCS_PREFIX),
                             fix="publish without --docs-dir")
    return docs


def _add_docs(git: _Git, docs: Path, index_env: dict, tmp_path: Path) -> None:
    """Put the docs folder's tree under docs/ of the index being built."""
    docs_env = {"GIT_INDEX_FILE": str(tmp_path / "docs-index")}
    git.run(f"--work-tree={docs}", "add", "--all", "--force", ".", cwd=docs, env=docs_env)
    tree = git.out("write-tree", env=docs_env)
    git.run("read-tree", f"--prefix={DOCS_PREFIX}/", tree, env=index_env)


def _over_the_branch(git: _Git, site_tree: str, parent: str | None, replace: tuple[str, ...],
                     branch: str, index_env: dict) -> str:
    """The tree to commit: the site's files, the branch's own files kept beside them (only
    what reportgen published before is replaced or removed: reportgen.commands.
    publish_branch), and the list of what this publish put there."""
    from reportgen.commands import publish_branch as pb

    new = pb.tree_entries(git, site_tree)
    kept = {}
    if parent is not None:
        old = pb.tree_entries(git, parent)
        kept = pb.merged_entries(new, old, pb.published_before(git, old), replace, branch)
    marker = git.out("hash-object", "-w", "--stdin", input=pb.marker_bytes(new))
    kept[pb.PUBLISHED_MARKER] = f"100644 blob {marker}"
    git.run("update-index", "--add", "-z", "--index-info", input=pb.index_info(kept),
            env=index_env)
    return git.out("write-tree", env=index_env)


def publish_site(site_dir: str | Path, *, remote: str = "origin", remote_url: str | None = None,
                 branch: str = "gh-pages", message: str | None = None, force: bool = False,
                 repo_dir: str | Path | None = None, docs_dir: str | Path | None = None,
                 replace: tuple[str, ...] = (), announce=None) -> str | None:
    """Commit `site_dir` over the tree of `branch` and push it to `remote_url` or the named
    `remote`; with `docs_dir`, that built documentation goes under docs/ of the same commit.
    The branch's files reportgen did not publish are kept; one the site would overwrite is
    refused unless `replace` names it (reportgen.commands.publish_branch). `announce(line)`
    is told what the docs folder holds before anything is pushed.

    Returns the pushed commit's id, or None when the site is unchanged.
    """
    from reportgen.commands.publish_docs import described
    from reportgen.commands.serve_cli import check_site_dir
    from reportgen.commands.work_folder import WORK_ROOT, WorkFolder

    site = check_site_dir(site_dir).resolve()
    docs = None
    if docs_dir is not None:
        docs, docs_files = _check_docs_dir(docs_dir, site)
        if announce is not None:
            announce(f"Publishing {docs_dir} under {DOCS_PREFIX}/: {described(docs, docs_files)}.")
    repo_dir = Path(repo_dir or Path.cwd())
    git_dir = _find_git_dir(repo_dir)
    # a private folder removed at the end, and by the next publish if this one is killed
    with WorkFolder((WORK_ROOT.parent / "publish").resolve()) as tmp_path:
        if git_dir is None:
            if remote_url is None:
                raise ReportgenError(
                    f"'{repo_dir.resolve()}' is not inside a git repository.",
                    expected="run from the project's repository (its remote is the target)",
                    fix="cd into the repository, or pass --remote-url URL")
            subprocess.run(["git", "init", "-q", str(tmp_path / "repo")], check=True)
            git_dir = tmp_path / "repo" / ".git"
        git = _Git(git_dir)
        if remote_url is not None:
            target = remote_url
        else:
            if git.run("remote", "get-url", remote, check=False).returncode != 0:
                remotes = git.out("remote") or "(none)"
                raise ReportgenError(f"The repository has no remote named '{remote}'.",
                                     expected="an existing remote",
                                     received=f"remotes: {remotes}",
                                     fix="pass --remote NAME or --remote-url URL "
                                         "(e.g. git@github.com:you/repo.git)")
            target = remote
        ref = f"refs/heads/{branch}"
        if git.run("check-ref-format", ref, check=False).returncode != 0:
            raise ReportgenError("Invalid branch name.", received=branch, fix="e.g. gh-pages")

        # The parent: the remote branch's tip (so the push fast-forwards), else a local branch.
        fetched = git.run("fetch", "--quiet", "--no-tags", target, ref, check=False)
        parent = None
        if fetched.returncode == 0:
            parent = git.out("rev-parse", "FETCH_HEAD")
        elif b"couldn't find remote ref" not in fetched.stderr:
            raise ReportgenError(f"Cannot reach the remote '{target}'.",
                                 received=fetched.stderr.decode(errors="replace").strip(),
                                 fix="check the remote URL and your credentials")
        elif git.run("rev-parse", "--verify", "--quiet", ref, check=False).returncode == 0:
            parent = git.out("rev-parse", ref)

        # The site's tree: the site folder plus .nojekyll, through a temporary index.
        index_env = {"GIT_INDEX_FILE": str(tmp_path / "index")}
        git.run(f"--work-tree={site}", "add", "--all", "--force", ".", cwd=site, env=index_env)
        empty_blob = git.out("hash-object", "-w", "--stdin", input=b"")
        git.run("update-index", "--add", "--cacheinfo", f"100644,{empty_blob},.nojekyll",
                env=index_env)
        _pin_not_found_page(git, site, git.out("remote", "get-url", target, check=False)
                            if remote_url is None else remote_url, index_env)
        if docs is not None:
            _add_docs(git, docs, index_env, tmp_path)
        site_tree = git.out("write-tree", env=index_env)
        # ... written over the branch's tree, keeping what reportgen did not publish there
        tree = _over_the_branch(git, site_tree, parent, tuple(replace), branch, index_env)
        if parent and git.out("rev-parse", f"{parent}^{{tree}}") == tree:
            return None

        if message is None:
            source = git.run("rev-parse", "--short", "HEAD", check=False)
            message = "Publish the reportgen site" + (
                f" (source {source.stdout.decode().strip()})" if source.returncode == 0 else "")
        args = ["commit-tree", tree, "-m", message] + (["-p", parent] if parent else [])
        commit = git.out(*args, env=_identity(git))
        pushed = git.run("push", "--quiet", *(["--force"] if force else []), target,
                         f"{commit}:{ref}", check=False)
        if pushed.returncode != 0:
            raise ReportgenError(f"Pushing to '{target}' ({branch}) failed.",
                                 received=pushed.stderr.decode(errors="replace").strip(),
                                 fix="check your rights on the remote; if its branch has "
                                     "diverged on purpose, use --force")
        # Keep the local branch in step (as ghp-import does) unless it is checked out.
        head = git.run("symbolic-ref", "--quiet", "HEAD", check=False).stdout.decode().strip()
        if git_dir.parent != tmp_path / "repo" and head != ref:
            git.run("update-ref", ref, commit, check=False)
        return commit


@click.command("publish")
@click.option("--site-dir", default="site", show_default=True,
              type=click.Path(file_okay=False), help="The folder `reportgen build` wrote.")
@click.option("--remote", default="origin", show_default=True,
              help="Name of the git remote to push to.")
@click.option("--remote-url", default=None,
              help="Push to this URL or path instead of a named remote.")
@click.option("--branch", default="gh-pages", show_default=True, help="Branch to publish to.")
@click.option("--message", "-m", default=None, help="Commit message [Publish the reportgen site].")
@click.option("--force", is_flag=True, help="Overwrite the branch even if it has diverged.")
@click.option("--docs-dir", default=None, type=click.Path(file_okay=False),
              help="Also publish reportgen's built documentation (`mkdocs build` writes "
                   "docs-site/) under docs/ of the same branch.")
@click.option("--replace", multiple=True, metavar="PATH",
              help="Let the site overwrite this file (or folder) of the branch, which reportgen "
                   "did not publish; repeatable.")
def command(site_dir, remote, remote_url, branch, message, force, docs_dir, replace):
    """Push the built site to a gh-pages branch (GitHub Pages).

    Run it from the project's git repository. Then set the repository's Pages source to the
    branch (GitHub: Settings > Pages > Deploy from a branch > gh-pages, / (root)). The
    branch's own files (a CNAME, a README, your pages) stay; only what reportgen published
    there before is replaced, and a site file that would overwrite one of yours is refused.

    \b
    Examples:
      reportgen publish                          # site/ -> origin gh-pages
      reportgen publish --remote-url git@github.com:me/capsnets.git -m "10 epochs"
      reportgen publish --replace index.html     # the site may take the branch's index.html
      mkdocs build && reportgen publish --docs-dir docs-site   # the docs under docs/
    """
    from reportgen.console import notice

    commit = publish_site(site_dir, remote=remote, remote_url=remote_url, branch=branch,
                          message=message, force=force, docs_dir=docs_dir, replace=replace,
                          announce=notice)
    target = remote_url or remote
    if commit is None:
        notice(f"The site is unchanged since the last publish: nothing pushed to {target} "
               f"{branch}.")
    else:
        docs = f", with {docs_dir} under {DOCS_PREFIX}/," if docs_dir is not None else ""
        notice(f"Published {site_dir}{docs} to {target} {branch} (commit {commit[:10]}).")
