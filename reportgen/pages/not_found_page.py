"""The site's 404.html, which the host serves for a missing URL at any depth.

MkDocs renders it with links from the server's root (`/assets/...`) when no `site_url` is set:
unstyled when opened from disk and under a GitHub project page (`OWNER.github.io/REPO/`).
The build makes its links relative to the site folder (right from disk and at a domain's
root); `reportgen publish` then pins them to where GitHub Pages serves the site with a
`<base href>`, since a 404 page is served at the missing URL's own path.
"""

from __future__ import annotations

import re
from pathlib import Path

NAME = "404.html"
# href="/x" and src="/x", and paths in Material's page config ("search": "/assets/…"), but not
# protocol-relative "//host/x".
_ROOT_LINK = re.compile(r'(\b(?:href|src)=|":\s*)"/(?=[^/"])')
_BASE = re.compile(r'("base":\s*)"/"')                  # Material's page config: the site root
_GITHUB = re.compile(r"github\.com[:/]+([^/]+)/([^/]+?)(?:\.git)?/?$")


def relative_links(html: str) -> str:
    """Root-absolute links of a page at the site's top level, made relative to it."""
    return _ROOT_LINK.sub(r'\1"', _BASE.sub(r'\1"."', html))


def make_relative(site: Path) -> None:
    """Rewrite `site`/404.html's root links (a no-op when there is none)."""
    page = Path(site) / NAME
    if page.is_file():
        html = page.read_text(encoding="utf-8")
        fixed = relative_links(html)
        if fixed != html:
            page.write_text(fixed, encoding="utf-8")


def github_pages_root(remote_url: str, site: Path) -> str | None:
    """The path GitHub Pages serves a gh-pages branch at: "/REPO/" for a project page, "/" for
    OWNER.github.io or a custom domain (a CNAME file in the site); None for other hosts."""
    match = _GITHUB.search(remote_url.strip())
    if match is None:
        return None
    owner, repo = match.groups()
    if (Path(site) / "CNAME").is_file() or repo.lower() == f"{owner.lower()}.github.io":
        return "/"
    return f"/{repo}/"


def with_base(html: str, root: str) -> str:
    """The page with its relative links resolved from `root` wherever it is served."""
    if "<base " in html:
        return html
    html = re.sub(r'("base":\s*)"\."', lambda m: f'{m.group(1)}"{root}"', html)
    return html.replace("<head>", f'<head>\n<base href="{root}">', 1)
