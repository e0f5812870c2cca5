"""`reportgen serve`: serve the built site over local HTTP (standard library only, no TensorFlow).

The site also opens straight from file://; serving it shows it as GitHub Pages will (and lets
MkDocs search run in its Web Worker).
"""

from __future__ import annotations

import functools
from http import HTTPStatus
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import click

from reportgen.errors import ReportgenError
from reportgen.pages.not_found_page import NAME as NOT_FOUND_PAGE


def check_site_dir(site_dir: str | Path) -> Path:
    """The built site folder, or a ReportgenError saying to run `reportgen build` first."""
    path = Path(site_dir)
    if not (path / "index.html").is_file():
        raise ReportgenError(
            f"No built site in '{path}'.",
            expected=f"{path / 'index.html'} (written by `reportgen build`)",
            received="missing folder" if not path.exists() else "a folder without index.html",
            fix="run `reportgen build` first (or pass --site-dir with the folder it wrote)")
    return path


class _Handler(SimpleHTTPRequestHandler):
    """Static files as GitHub Pages serves them: a missing path answers 404 with the site's own
    404.html (which finds the site's root from any depth: reportgen.pages.not_found_page), and
    a folder without an index.html is missing, not listed. No caching, so a rebuilt site shows
    at the next reload."""

    quiet = False

    def end_headers(self):
        self.send_header("Cache-Control", "no-cache")
        super().end_headers()

    def list_directory(self, path):
        self.send_error(HTTPStatus.NOT_FOUND)
        return None

    def send_head(self):
        # a path no file can have (a NUL byte, %00, makes open() raise): not found, as on
        # GitHub Pages, rather than a dropped connection and a traceback
        try:
            return super().send_head()
        except ValueError:
            self.send_error(HTTPStatus.NOT_FOUND)
            return None

    def send_error(self, code, message=None, explain=None):
        page = Path(self.directory) / NOT_FOUND_PAGE
        if code != HTTPStatus.NOT_FOUND or not page.is_file():
            super().send_error(code, message, explain)
            return
        # served from the site's root: the page's links pinned to it (reportgen.pages.
        # not_found_page.with_base), so that a missing URL at any depth costs no failed
        # request for the page's own styles and scripts
        from reportgen.pages.not_found_page import with_base

        body = with_base(page.read_text(encoding="utf-8"), "/").encode("utf-8")
        self.send_response(code, message)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def log_message(self, format, *args):  # noqa: A002 - the base class's signature
        if not self.quiet:
            super().log_message(format, *args)


def make_server(site_dir: str | Path, host: str = "127.0.0.1", port: int = 8000,
                quiet: bool = False) -> ThreadingHTTPServer:
    """A threaded HTTP server for `site_dir` (port 0 = any free port; see server_address)."""
    path = check_site_dir(site_dir)
    handler = type("Handler", (_Handler,), {"quiet": quiet})
    try:
        return ThreadingHTTPServer((host, port),
                                   functools.partial(handler, directory=str(path.resolve())))
    except OSError as exc:
        raise ReportgenError(f"Cannot listen on {host}:{port}.", received=str(exc),
                             fix="pick another port with --port (or stop the other server)"
                             ) from exc


def serve_site(site_dir: str | Path, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Serve until Ctrl-C."""
    from reportgen.console import notice

    server = make_server(site_dir, host, port)
    bound_host, bound_port = server.server_address[:2]
    notice(f"Serving {Path(site_dir).resolve()} at http://{bound_host}:{bound_port}/ "
           "(Ctrl-C to stop)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        notice("Stopped.")
    finally:
        server.server_close()


@click.command("serve")
@click.option("--site-dir", default="site", show_default=True,
              type=click.Path(file_okay=False), help="The folder `reportgen build` wrote.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535),
              help="TCP port (0 = any free port).")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Interface to listen on (0.0.0.0 = every interface: others can see it).")
def command(site_dir, port, host):
    """Serve the built site locally (plain HTTP, no TensorFlow).

    \b
    Example:
      reportgen serve --port 8000     # then open http://127.0.0.1:8000/
    """
    serve_site(site_dir, host, port)
