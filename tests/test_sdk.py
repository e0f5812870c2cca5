"""reportgen.sdk is the one public surface: every name it lists resolves and is documented in
the docs' reference, importing it imports neither TensorFlow nor matplotlib, and the example
packages import nothing of reportgen but it."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import reportgen.sdk as sdk

ROOT = Path(__file__).resolve().parents[1]


def test_every_listed_name_resolves():
    assert len(set(sdk.__all__)) == len(sdk.__all__)
    missing = [name for name in sdk.__all__ if not hasattr(sdk, name)]
    assert not missing
    assert isinstance(sdk.SDK_VERSION, int)


def test_importing_the_sdk_imports_no_tensorflow_and_no_matplotlib():
    code = ("import sys, reportgen.sdk, reportgen.sdk.testing; "
            "print(sorted(m for m in ('tensorflow', 'keras', 'matplotlib') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def test_the_lazy_names_are_what_they_name():
    from reportgen.capsnet.ops import squash
    from reportgen.figures.plots import styled

    assert sdk.squash is squash and sdk.styled is styled


def _reportgen_imports(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
        elif isinstance(node, ast.Import):
            names += [a.name for a in node.names]
    return [n for n in names if n == "reportgen" or n.startswith("reportgen.")]


def test_the_example_packages_import_only_the_sdk():
    packages = sorted(p for p in (ROOT / "examples").iterdir() if (p / "pyproject.toml").exists())
    assert packages
    offenders = {}
    for package in packages:
        for path in sorted(package.rglob("*.py")):
            bad = [n for n in _reportgen_imports(path)
                   if n not in ("reportgen.sdk", "reportgen.sdk.testing")]
            if bad:
                offenders[str(path.relative_to(ROOT))] = bad
    assert not offenders


def test_the_reference_documents_every_name():
    page = (ROOT / "docs" / "reference" / "sdk.md").read_text("utf-8")
    assert "::: reportgen.sdk" in page
    undocumented = [n for n in sdk.__all__ if f"`{n}`" not in page]
    assert not undocumented
    import reportgen.sdk.testing as kit

    assert "::: reportgen.sdk.testing" in page
    assert not [n for n in kit.__all__ if f"`{n}`" not in page]


# What a built-in declaration imports of reportgen besides the SDK and its own package's
# modules (its network, imported inside `build`): EM's 4x4 pose sizes (POSE, PRIMARY_CHANNELS),
# which the shared description and the matrix-capsule figures read too.
BUILT_IN_BEYOND_THE_SDK = {"em": ["reportgen.capsnet.description"]}


def test_the_builtin_declarations_import_the_sdk_as_a_package_of_yours_does():
    offenders = {}
    for path in sorted((ROOT / "reportgen" / "families").glob("*/__init__.py")):
        name = path.parent.name
        bad = [n for n in _reportgen_imports(path)
               if n != "reportgen.sdk" and not n.startswith(f"reportgen.families.{name}.")]
        if bad != BUILT_IN_BEYOND_THE_SDK.get(name, []):
            offenders[name] = bad
    assert len(list((ROOT / "reportgen" / "families").glob("*/__init__.py"))) >= 5
    assert not offenders
