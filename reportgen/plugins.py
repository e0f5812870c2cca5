"""Plug-ins from installed packages: model families (entry-point group `reportgen.families`)
and techniques (`reportgen.techniques`), found with `importlib.metadata` the way MkDocs finds
its plugins (`mkdocs.plugins`). reportgen's own families and techniques are registered the same
way, in its pyproject.toml; a researcher's package declares its own:

    [project.entry-points."reportgen.families"]
    my_routing = "my_package.family:FAMILY"

    [project.entry-points."reportgen.techniques"]
    my_figure = "my_package.technique:TECHNIQUE"

A plug-in that fails to import (an exception, `sys.exit()`, or an import that does not finish
within IMPORT_SECONDS), or declares something invalid, costs one line naming its package and
the reason (said once per process); every other plug-in still loads. reportgen's own families
and techniques always keep their names: a plug-in declaring one of them is refused, installed
or run from a source tree. The registries (reportgen.settings.families, reportgen.techniques)
decide what is valid; this module only finds, loads and remembers.
"""

from __future__ import annotations

import os
import signal
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Callable

FAMILIES = "reportgen.families"
TECHNIQUES = "reportgen.techniques"
GROUPS = (FAMILIES, TECHNIQUES)
OWN_PACKAGE = "reportgen"
# How long one plug-in's import may take before it is given up (REPORTGEN_PLUGIN_SECONDS):
# a package that hangs at import costs one line, not the command.
IMPORT_SECONDS = 30.0


@dataclass(frozen=True)
class Plugin:
    """One entry point of a plug-in group, and what became of it."""

    group: str
    name: str                 # the entry point's name
    target: str               # "module:attribute"
    package: str              # the distribution declaring it ("reportgen" for the built-ins)
    version: str
    loaded: Any = None        # the Family or Technique, when it loaded and was accepted
    problem: str = ""         # why it was not loaded ("" when it was)

    @property
    def origin(self) -> str:
        return f"{self.package} {self.version}".strip()

    @property
    def builtin(self) -> bool:
        return self.package == OWN_PACKAGE

    def problem_line(self) -> str:
        """The one line said about a plug-in that did not load."""
        kind = "family" if self.group == FAMILIES else "technique"
        return (f"Plug-in {kind} '{self.name}' of package {self.origin} ({self.target}) was "
                f"not loaded: {self.problem}")


def own_version() -> str:
    """reportgen's version: its package metadata's, else its `__version__` (a source tree)."""
    try:
        return metadata.version(OWN_PACKAGE)
    except metadata.PackageNotFoundError:
        import sys

        # the package is imported already (this module is part of it): no import, no cycle
        return getattr(sys.modules.get(OWN_PACKAGE), "__version__", "")


def own_record(group: str, name: str, target: str) -> Plugin:
    """The record of one of reportgen's own plug-ins read from its package, when its entry
    points are not installed (a source tree run without `pip install -e .`)."""
    return Plugin(group=group, name=name, target=target, package=OWN_PACKAGE,
                  version=own_version())


class PluginRejected(Exception):
    """Raised by a registry's `accept` for a declaration it refuses; the message is the
    reason, said in the plug-in's one line."""


_said: set[tuple[str, str]] = set()
# A helper process of a command (the build's drawing worker) leaves the saying to the command.
quiet = False


def _distribution(entry) -> tuple[str, str]:
    dist = getattr(entry, "dist", None)
    if dist is None:
        return "unknown package", ""
    name = dist.metadata["Name"] if dist.metadata is not None else None
    return (name or "unknown package"), (dist.version or "")


def entry_points(group: str) -> list:
    """The installed entry points of `group`: reportgen's own first, then by package and
    name (a stable order whatever the install order). Two with the same name in one package
    (a metadata listed twice on the path) count once."""
    found, seen = [], set()
    for entry in metadata.entry_points(group=group):
        package, _ = _distribution(entry)
        if (package, entry.name) in seen:
            continue
        seen.add((package, entry.name))
        found.append(entry)
    return sorted(found, key=lambda e: (_distribution(e)[0] != OWN_PACKAGE,
                                        _distribution(e)[0], e.name))


def load(group: str, accept: Callable[[Any, Plugin], None]) -> list[Plugin]:
    """Load every entry point of `group`; `accept(obj, plugin)` registers what loaded or
    raises PluginRejected (or ValueError / TypeError) with the reason it is refused. Returns
    every plug-in with what became of it; a problem is said once per process (`say`)."""
    plugins = []
    for entry in entry_points(group):
        package, version = _distribution(entry)
        plugin = Plugin(group=group, name=entry.name, target=entry.value, package=package,
                        version=version)
        try:
            with _time_limit(_import_seconds()):
                obj = entry.load()
        except _ImportTooLong:
            plugin = _with_problem(plugin, f"importing it did not finish within "
                                           f"{_import_seconds():g} s (a package that waits or "
                                           f"loops at import; REPORTGEN_PLUGIN_SECONDS sets "
                                           f"the limit)")
        except SystemExit as exc:           # sys.exit() at import: not the command's exit
            plugin = _with_problem(plugin, f"importing it called sys.exit({exc.code!r})")
        except Exception as exc:            # its import failed: the others still load
            plugin = _with_problem(plugin, f"importing it failed ({_one_line(exc)})")
        else:
            try:
                declared = getattr(obj, "name", None)
                if isinstance(declared, str) and declared != entry.name:
                    raise PluginRejected(f"its entry point is named '{entry.name}' but it "
                                         f"declares '{declared}'; name them alike")
                accept(obj, plugin)
            except (PluginRejected, ValueError, TypeError) as exc:
                plugin = _with_problem(plugin, str(exc) if isinstance(exc, PluginRejected)
                                       else _one_line(exc))
            else:
                plugin = Plugin(**{**plugin.__dict__, "loaded": obj})
        plugins.append(plugin)
        if plugin.problem:
            say(plugin)
    return plugins


def own_installed(group: str) -> bool:
    """Whether reportgen's own entry points of `group` are installed (else a source-tree run
    reads its own plug-ins from its package, and does so first, so that they keep their
    names)."""
    return any(_distribution(e)[0] == OWN_PACKAGE for e in entry_points(group))


class _ImportTooLong(Exception):
    pass


def _import_seconds() -> float:
    try:
        return max(0.0, float(os.environ.get("REPORTGEN_PLUGIN_SECONDS", IMPORT_SECONDS)))
    except ValueError:
        return IMPORT_SECONDS


@contextmanager
def _time_limit(seconds: float):
    """Interrupt the block after `seconds` with _ImportTooLong (a real-time timer's signal,
    so a sleeping or looping import is interrupted between two Python instructions); no limit
    off the main thread (a signal handler can only be set there) or without SIGALRM."""
    if seconds <= 0 or threading.current_thread() is not threading.main_thread() or \
            not hasattr(signal, "setitimer"):
        yield
        return

    def interrupt(signum, frame):
        raise _ImportTooLong()

    previous = signal.signal(signal.SIGALRM, interrupt)
    remaining = signal.setitimer(signal.ITIMER_REAL, seconds)[0]
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if remaining:                       # a timer of someone else's: give it back
            signal.setitimer(signal.ITIMER_REAL, remaining)


def say(plugin: Plugin) -> None:
    """Print a plug-in's problem once per process (stderr, one line)."""
    key = (plugin.group, f"{plugin.package}:{plugin.name}")
    if key in _said or quiet:
        return
    _said.add(key)
    from reportgen import console

    console.notice(plugin.problem_line())


def _with_problem(plugin: Plugin, problem: str) -> Plugin:
    return Plugin(**{**plugin.__dict__, "problem": " ".join(problem.split())})


def _one_line(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())
