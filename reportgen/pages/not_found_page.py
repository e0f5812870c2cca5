"""The site's 404.html, which the host serves for a missing URL at any depth.

MkDocs renders it with links from the server's root (`/assets/...`) when no `site_url` is set:
unstyled when opened from disk and under a GitHub project page (`OWNER.github.io/REPO/`).
The build makes its links relative to the site folder (right from disk), and since a 404 page
is served at the missing URL's own path, which the build cannot know, the page finds the
site's root itself: a script ahead of every link tries the folders of the missing URL (first
the one above a name the site has at its top, such as `models`, then from the shallowest
down, where a site's root usually is: a missing URL costs at most as many failed probes as its
root is deep, not as the URL is) for a file every reportgen site holds, and puts a
`<base href>` of the first that has it. So the
page is styled and its Home link right at any depth, on GitHub Pages (`/REPO/...`), behind
`reportgen serve` or any host that serves 404.html for missing paths. `reportgen publish`
pins the root it knows (`with_base`); the script then does nothing.
"""

from __future__ import annotations

import json
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


# Where the root is found: a file every reportgen site has (reportgen.pages.environment).
_PROBE = "assets/reportgen/reportgen.js"
_FIND_ROOT = """<script>/* reportgen: the site's root, wherever this page is served */
(function (d, l) {
  if (l.protocol === "file:" || d.querySelector("base")) return;
  var top = %(top)s, parts = l.pathname.split("/").slice(1, -1), tries = [], i, x, root;
  for (i = 0; i < parts.length; i++) if (top.indexOf(parts[i]) >= 0) { tries.push(i); break; }
  for (i = 0; i <= parts.length; i++) if (tries[0] !== i) tries.push(i);
  for (i = 0; i < tries.length; i++) {
    root = "/" + parts.slice(0, tries[i]).concat("").join("/");
    x = new XMLHttpRequest();
    try { x.open("HEAD", root + %(probe)s, false); x.send(); } catch (e) { continue; }
    if (x.status === 200) {
      x = d.createElement("base"); x.href = root; d.head.appendChild(x);
      window.__reportgenRoot = root; return;
    }
  }
})(document, location);</script>"""
# Material resolves its config's "base" against the URL, not the <base>: set it to the root.
_CONFIG = re.compile(r'(<script id="__config"[^>]*>.*?</script>)', re.DOTALL)
_FIX_CONFIG = ("<script>(function (c, r) { if (c && r) c.textContent = "
               "c.textContent.replace('\"base\": \".\"', '\"base\": ' + JSON.stringify(r)); })"
               "(document.getElementById(\"__config\"), window.__reportgenRoot);</script>")


def make_relative(site: Path, probe: str = _PROBE) -> None:
    """Rewrite `site`/404.html's root links relative to the site folder, and make the page
    find the site's root wherever it is served (a no-op without a 404.html). `probe`: a file
    every such site holds, relative to its root (the docs' MkDocs build: its search index)."""
    page = Path(site) / NAME
    if not page.is_file():
        return
    html = page.read_text(encoding="utf-8")
    top = sorted(entry.name for entry in Path(site).iterdir())
    script = _FIND_ROOT % {"top": json.dumps(top), "probe": json.dumps(probe)}
    fixed = relative_links(html).replace("<head>", f"<head>\n{script}", 1)
    fixed = _CONFIG.sub(lambda m: m.group(1) + _FIX_CONFIG, fixed, count=1)
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
