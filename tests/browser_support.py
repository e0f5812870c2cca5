"""Shared by the browser tests: Debian's Chromium (never a downloaded browser), a local server."""

from __future__ import annotations

import shutil
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]


@contextmanager
def serve(root: Path) -> Iterator[str]:
    """Serve `root` on 127.0.0.1 (a free port) with reportgen's own server; yields the base URL."""
    from reportgen.commands.serve_cli import make_server

    with _running(make_server(root, "127.0.0.1", 0, quiet=True)) as url:
        yield url


@contextmanager
def _running(server, path: str = "/") -> Iterator[str]:
    """`server` serving from a thread of its own until the block ends; yields its URL."""
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}{path}"
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def chromium():
    """Headless Debian Chromium driven by Playwright."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield browser
        finally:
            browser.close()


@contextmanager
def pages_like(root: Path, prefix: str = "/capsnets/") -> Iterator[str]:
    """Serve `root` as GitHub Pages serves a project site: under `prefix` (/REPO/), and a
    missing path at any depth answered 404 with the site's own 404.html (GitHub Pages' custom
    404 page). Plain http.server, none of reportgen's code; yields the site's URL."""
    from functools import partial
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    class Pages(SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def translate_path(self, path):
            path = path.split("?", 1)[0].split("#", 1)[0]
            inner = path[len(prefix):] if path.startswith(prefix) else "\0missing"
            return super().translate_path("/" + inner)

        def list_directory(self, path):
            self.send_error(404)

        def send_error(self, code, message=None, explain=None):
            body = (root / "404.html").read_bytes()
            self.send_response(code)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

    with _running(ThreadingHTTPServer(("127.0.0.1", 0), partial(Pages, directory=str(root))),
                  prefix) as url:
        yield url
