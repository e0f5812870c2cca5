"""Figure files hard-linked into the site instead of copied, during `build_site`'s MkDocs run.

The docs folder's `artifacts/` files are hard links of the artifact store's entries (or copies
where links fail, reportgen.pages.assemble.place_files), and nothing rewrites them in place:
the store renames whole entries into place and the docs folder replaces a file by unlinking it
first. So the site can share those files too. MkDocs copies every static file, which on this
project's machine costs ~0.3-0.7 ms of file-system work per file (a default site has ~5,600);
a link costs ~0.02 ms. Anything else (theme assets, files outside the docs folder, another
file system) is copied by MkDocs as before.
"""

from __future__ import annotations

import os

from mkdocs.plugins import BasePlugin
from mkdocs.structure.files import File

PREFIX = "artifacts/"


class LinkedFile(File):
    """A docs file that `copy_file` hard-links into the site (a copy when that fails)."""

    def copy_file(self, dirty: bool = False) -> None:
        source = self.abs_src_path
        if not dirty and source is not None and getattr(self, "_content", None) is None:
            target = self.abs_dest_path
            os.makedirs(os.path.dirname(target), exist_ok=True)
            try:
                os.link(source, target)
                return
            except OSError:          # another file system, or the target is there: copy
                pass
        super().copy_file(dirty)


class LinkFigures(BasePlugin):
    """Turns the docs folder's `artifacts/` files into LinkedFile (MkDocs' `on_files` event)."""

    def on_files(self, files, config):
        # MkDocs joins docs_dir and src_uri (normalised) into abs_src_path: no file-system calls
        docs = os.path.join(os.path.normpath(os.path.abspath(config["docs_dir"])), "")
        for file in files:
            if (type(file) is File and file.src_uri.startswith(PREFIX)
                    and not file.is_documentation_page() and file.abs_src_path is not None
                    and os.path.normpath(file.abs_src_path).startswith(docs)):
                file.__class__ = LinkedFile     # same object, same fields: only the copy differs
        return files


def register(config) -> None:
    """Add the plugin to a loaded MkDocs configuration (before `build(config)`)."""
    config.plugins["reportgen/linked-figures"] = LinkFigures()
