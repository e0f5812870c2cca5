"""`reportgen cache info|clear`."""

from __future__ import annotations

import click


@click.group("cache")
@click.option("--cache-dir", default=None, type=click.Path(file_okay=False),
              envvar="REPORTGEN_CACHE", help="Artifact store [.reportgen/cache].")
@click.pass_context
def command(ctx, cache_dir):
    """Inspect or clear the artifact store.

    \b
    Examples:
      reportgen cache info
      reportgen cache clear
    """
    ctx.obj = {**(ctx.obj or {}), "cache_dir": cache_dir}


@command.command("info")
@click.pass_context
def info(ctx):
    """Entries and bytes of the artifact store, and the builds using it.

    \b
    Example:
      reportgen cache --cache-dir .reportgen/cache info
    """
    from reportgen import console
    from reportgen.cache.backends import open_store

    data = open_store(ctx.obj["cache_dir"]).info()
    state = "" if data["exists"] else " (not created yet)"
    if data["exists"] and not data["is_store"]:
        state = " (not a reportgen artifact store)"
    console.echo(f"store: {data['root']}{state}")
    for kind in ("arrays", "figures"):
        console.echo(f"  {kind:<8} {data[kind]['entries']:>7} entries "
                     f"{data[kind]['bytes'] / 1e6:>10.1f} MB")
    console.echo(f"  {'working':<8} {data['tmp']['entries']:>7} folders "
                 f"{data['tmp']['bytes'] / 1e6:>10.1f} MB")
    builds = data["builds"]
    console.echo(f"  builds using it: {len(builds)}" + (f" ({'; '.join(builds)})" if builds
                                                       else ""))


@command.command("clear")
@click.option("--no-wait", is_flag=True,
              help="While a build uses the store, stop at once (exit 2) instead of waiting.")
@click.pass_context
def clear(ctx, no_wait):
    """Delete every cached artifact (the next build recomputes them).

    Waits for running builds to finish first. Refuses a folder that is not an artifact store.

    \b
    Example:
      reportgen cache clear --no-wait
    """
    from reportgen import console
    from reportgen.cache.backends import open_store

    store = open_store(ctx.obj["cache_dir"])
    freed = store.clear(wait=not no_wait, on_wait=console.notice)
    console.echo(f"freed {freed / 1e6:.1f} MB")
    if store.root.is_dir() and any(store.root.iterdir()):
        console.echo(f"kept {store.root}: it holds files reportgen did not make")
