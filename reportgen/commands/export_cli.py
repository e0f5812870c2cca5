"""`reportgen export`: a built site's figures, captions, references and numbers as one zip."""

from __future__ import annotations

import click


@click.command("export")
@click.option("--models", default="*", show_default=True,
              help="Models to include (a glob over the site's model names).")
@click.option("--out", default="supplement.zip", show_default=True,
              type=click.Path(dir_okay=False),
              help="The zip file to write: a new file, or a supplement reportgen wrote "
                   "(with --force). Any other file is never replaced.")
@click.option("--force", is_flag=True,
              help="Replace --out when it is a supplement reportgen wrote earlier.")
@click.option("--steps", default="last", show_default=True,
              help="Training steps: last (the site's default), all, or built steps E-B,E-B.")
@click.option("--inputs", default="all", show_default=True,
              help="Per-input figures: all, none, or input keys (test-3,test-7).")
@click.option("--figures", default=None, metavar="PATTERNS",
              help="Only the figures a paper uses: glob patterns over the figures' names, "
                   "comma-separated (the full supplement's README.txt lists every name), "
                   "e.g. 'MNIST_Demo/*/test-3/rpv-*,*/training_curves'; their numbers and "
                   "the references their captions cite come with them.")
@click.option("--site-dir", default="site", show_default=True,
              type=click.Path(file_okay=False), help="The site `reportgen build` made.")
@click.option("--cache-dir", default=None, type=click.Path(file_okay=False),
              envvar="REPORTGEN_CACHE", help="Artifact store the build used [.reportgen/cache].")
def command(models, out, force, steps, inputs, figures, site_dir, cache_dir):
    """Write the paper supplement of a built site: every figure as PNG (2x) and, for plots,
    PDF and SVG; captions.tex (one figure environment per figure); references.bib; the numbers
    behind every plot as CSV. The same site gives the same bytes. An existing --out is
    replaced only when reportgen wrote it and --force is given.

    \b
    Examples:
      reportgen build --models 'MNIST_*' && reportgen export --models 'MNIST_*' --out supplement.zip
      reportgen export --figures 'MNIST_Demo/*/test-3/rpv-*,*/training_curves' --out paper.zip
    """
    from reportgen import console
    from reportgen.cache.store import ArtifactStore
    from reportgen.errors import ReportgenError
    from reportgen.commands.supplement import export

    store = ArtifactStore(cache_dir)
    if not store.root.is_dir() or not store.is_store():
        raise ReportgenError(f"No artifact store at {store.root}",
                             fix="run `reportgen build` (or `reportgen demo`) first, or "
                                 "point --cache-dir at the store the build used")
    with store.shared_lock():           # `cache clear` waits until the files are read
        chosen = [p.strip() for p in figures.split(",") if p.strip()] if figures else None
        path, supplement = export(site_dir, store, out, models, steps, inputs, force=force,
                                  figures=chosen)
    console.echo(f"wrote {path}: {len(supplement.figures)} figures, {len(supplement.data)} CSV "
                 f"files, {len(supplement.references)} references")
