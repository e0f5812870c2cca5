"""`reportgen plugins`: every model family and technique, the package it comes from, its
version and its citation; and each plug-in that did not load, with the reason. Registered
through the entry-point groups `reportgen.families` and `reportgen.techniques`
(reportgen.plugins); no TensorFlow is imported.
"""

from __future__ import annotations

import json

import click


def plugin_rows() -> list[dict]:
    """One dict per plug-in: group ("family" | "technique"), name, package, version, loaded,
    citations (short forms, "Sabour et al. 2017"), problem."""
    from reportgen import bibtex
    from reportgen.settings import families
    from reportgen.techniques import get_technique
    from reportgen.techniques import plugin_records as technique_records

    def cited(entries) -> list[str]:
        return [bibtex.short(e) for e in bibtex.unique(entries)]

    rows = []
    for kind, records in (("family", families.plugin_records()),
                          ("technique", technique_records())):
        for p in records:
            row = {"group": kind, "name": p.name, "package": p.package, "version": p.version,
                   "loaded": not p.problem, "citations": [], "problem": p.problem or None}
            if not p.problem:
                declared = families.family(p.name).citations if kind == "family" \
                    else get_technique(p.name).citations
                row["citations"] = cited(declared)
            rows.append(row)
    return rows


@click.command("plugins")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def command(as_json):
    """List the model families and techniques: package, version and citation of each, and every
    plug-in that could not be loaded, with why.

    A package adds its own through the entry-point groups "reportgen.families" and
    "reportgen.techniques" (see CONTRIBUTING.md and examples/).

    \b
    Example:
      reportgen plugins
    """
    rows = plugin_rows()
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    for kind, title in (("family", "Model families"), ("technique", "Techniques")):
        shown = [r for r in rows if r["group"] == kind and r["loaded"]]
        click.echo(f"{title} ({len(shown)}):")
        width = max([len(r["name"]) for r in shown] + [4])
        origin = max([len(f"{r['package']} {r['version']}") for r in shown] + [4])
        for r in shown:
            cites = "; ".join(r["citations"]) or "no citation declared"
            click.echo(f"  {r['name']:<{width}}  {r['package'] + ' ' + r['version']:<{origin}}"
                       f"  {cites}")
        click.echo("")
    broken = [r for r in rows if not r["loaded"]]
    if broken:
        click.echo(f"Not loaded ({len(broken)}):")
        for r in broken:
            click.echo(f"  {r['group']} {r['name']} ({r['package']} {r['version']}): "
                       f"{r['problem']}")
