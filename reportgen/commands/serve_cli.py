"""`reportgen serve`: serve the built site over local HTTP (standard library only, no TensorFlow).

The site also opens straight from file://; serving it shows it as GitHub Pages will (and lets
MkDocs search run in its Web Worker). Served, a model's overview also follows a training run as
it goes: `/_live/NAME.json` answers what `models/NAME/` holds now (reportgen.commands.
live_training), which the page asks every few seconds.
"""

from __future__ import annotations

import functools
import json
from http import HTTPStatus
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import click

from reportgen.commands.live_training import LIVE_COOKIE, PREFIX
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
    models_dir: Path | None = None      # the project's models folder: the live training view

    def do_GET(self):
        if self.path.startswith(PREFIX):
            self._live()
        else:
            super().do_GET()

    def _live(self):
        from urllib.parse import parse_qs, unquote, urlsplit

        from reportgen.commands.live_training import live_record

        parts = urlsplit(self.path)
        name = unquote(parts.path[len(PREFIX):]).removesuffix(".json")
        query = parse_qs(parts.query)

        def number(key: str, default: int) -> int:
            try:
                return int(query.get(key, [default])[0])
            except ValueError:
                return default

        record = live_record(self.models_dir, name, number("classes", 10),
                             number("labels", 1)) if self.models_dir else None
        if record is None:
            self.send_error(HTTPStatus.NOT_FOUND)
            return
        body = json.dumps(record, allow_nan=False, default=str).encode("utf-8")
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def end_headers(self):
        self.send_header("Cache-Control", "no-cache")
        if self.models_dir is not None:
            # tells the pages they may ask for the live view (live-training.js): a page served
            # without it asks nothing, so no other server sees a request it answers with 404
            self.send_header("Set-Cookie", f"{LIVE_COOKIE}=1; Path=/; SameSite=Strict")
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
                quiet: bool = False, models_dir: str | Path | None = None
                ) -> ThreadingHTTPServer:
    """A threaded HTTP server for `site_dir` (port 0 = any free port; see server_address);
    with `models_dir` (a folder of model folders) it answers the live training view too."""
    path = check_site_dir(site_dir)
    models = Path(models_dir).resolve() if models_dir and Path(models_dir).is_dir() else None
    handler = type("Handler", (_Handler,), {"quiet": quiet, "models_dir": models})
    try:
        return ThreadingHTTPServer((host, port),
                                   functools.partial(handler, directory=str(path.resolve())))
    except OSError as exc:
        raise ReportgenError(f"Cannot listen on {host}:{port}.", received=str(exc),
                             fix="pick another port with --port (or stop the other server)"
                             ) from exc


def serve_site(site_dir: str | Path, host: str = "127.0.0.1", port: int = 8000,
               models_dir: str | Path | None = "models") -> None:
    """Serve until Ctrl-C."""
    from reportgen.console import notice

    server = make_server(site_dir, host, port, models_dir=models_dir)
    bound_host, bound_port = server.server_address[:2]
    live = server.RequestHandlerClass.func.models_dir \
        if hasattr(server.RequestHandlerClass, "func") else None
    notice(f"Serving {Path(site_dir).resolve()} at http://{bound_host}:{bound_port}/ "
           "(Ctrl-C to stop)" + (f"; model overviews follow training runs in {live}"
                                 if live else ""))
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
@click.option("--models-dir", default="models", show_default=True,
              type=click.Path(file_okay=False),
              help="The model folders whose training runs the overviews follow as they go.")
def command(site_dir, port, host, models_dir):
    """Serve the built site locally (plain HTTP, no TensorFlow).

    \b
    Example:
      reportgen serve --port 8000     # then open http://127.0.0.1:8000/

    While `reportgen train NAME` runs, NAME's overview shows each saved step within seconds
    (its curves and latest accuracy), without a build; `reportgen build` then adds the step's
    analyses.
    """
    serve_site(site_dir, host, port, models_dir)
