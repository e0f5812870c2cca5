"""MkDocs hook (named in mkdocs.yml): adds the generated reference pages
(reportgen.docs_reference) to the docs build, in memory: nothing is written into docs/; and,
as for the analysis site, makes the built 404.html's links relative and its root found wherever
it is served (MkDocs writes them from the server's root without a `site_url`)."""

from __future__ import annotations

from pathlib import Path

from mkdocs.structure.files import File


def on_files(files, config):
    from reportgen.docs_reference import generated_pages

    project_dir = Path(config["config_file_path"]).resolve().parent
    for path, markdown in generated_pages(project_dir).items():
        files.append(File.generated(config, path, content=markdown))
    return files


def on_post_build(config):
    from reportgen.pages.not_found_page import make_relative

    make_relative(Path(config["site_dir"]), probe="search/search_index.json")
