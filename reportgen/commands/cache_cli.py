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
    """Entries and bytes of the artifact store."""
    from reportgen.cache.store import ArtifactStore

    data = ArtifactStore(ctx.obj["cache_dir"]).info()
    click.echo(f"store: {data['root']}")
    for kind in ("arrays", "figures"):
        click.echo(f"  {kind:<8} {data[kind]['entries']:>7} entries "
                   f"{data[kind]['bytes'] / 1e6:>10.1f} MB")


@command.command("clear")
@click.pass_context
def clear(ctx):
    """Delete every cached artifact (the next build recomputes them)."""
    from reportgen.cache.store import ArtifactStore

    freed = ArtifactStore(ctx.obj["cache_dir"]).clear()
    click.echo(f"freed {freed / 1e6:.1f} MB")
