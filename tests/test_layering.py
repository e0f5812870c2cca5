"""Who may import whom inside reportgen, read from the source with `ast` (nothing is imported).

Every import of a reportgen module is one of three kinds:
- module level: runs when the importing module is imported (also inside a module-level try/if);
- lazy: inside a function or lambda, runs only when it is called (used to defer TensorFlow and
  other heavy modules, and allowed for that);
- type only: under `if TYPE_CHECKING:`, never runs.

The layering rules (model_folder's imports, training below the catalog and the commands) count
every kind: a lazy import upward is still upward. The subpackages (reportgen.X, a top-level
module or package) must form no cycle through module-level imports. Cycles that lazy or
type-only imports close are listed below as known exceptions, each with its reason, until they
are removed; any new one fails.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "reportgen"

# Cycles closed by lazy or type-only imports, as the set of modules (or subpackages) in each.
KNOWN_LAZY_CYCLES = {
    frozenset({"reportgen.data.datasets", "reportgen.data.inputs"}):
        "datasets reads image folders with inputs.load_image_file (lazily); inputs names "
        "datasets.Dataset in type hints (TYPE_CHECKING)",
}


def _modules() -> dict[str, Path]:
    """Every module of reportgen but a package's own tests (reportgen/**/tests/, run by pytest
    and imported by no module of reportgen)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if "tests" in parts[:-1]:
            continue
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _imports(path: Path) -> list[tuple[str, str, int]]:
    """(imported module, kind, line) of every import in one file, absolute or relative."""
    with warnings.catch_warnings():  # another module's SyntaxWarning is not a layering matter
        warnings.simplefilter("ignore")
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = _name_of(path).rsplit(".", 0 if path.name == "__init__.py" else 1)[0]
    found = []

    def target(node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        base = package.split(".")
        base = base[:len(base) - node.level + 1]
        return ".".join(base + ([node.module] if node.module else []))

    def visit(node: ast.AST, kind: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                visit(child, "type only" if kind == "type only" else "lazy")
                continue
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for inner in child.body:
                    visit(ast.Module(body=[inner], type_ignores=[]), "type only")
                for inner in child.orelse:
                    visit(ast.Module(body=[inner], type_ignores=[]), kind)
                continue
            if isinstance(child, ast.Import):
                found.extend((alias.name, kind, child.lineno) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                module = target(child)
                for alias in child.names:  # `from reportgen.training import trainer`
                    sub = f"{module}.{alias.name}"
                    found.append((sub if sub in MODULES else module, kind, child.lineno))
            visit(child, kind)

    visit(tree, "module level")
    return found


def _name_of(path: Path) -> str:
    return next(name for name, p in MODULES.items() if p == path)


IMPORTS = {name: _imports(path) for name, path in MODULES.items()}


def _ours(module: str) -> bool:
    return module == "reportgen" or module.startswith("reportgen.")


def _unit(module: str) -> str:
    """The subpackage of a module: reportgen.X (the root package is its own unit)."""
    return ".".join(module.split(".")[:2])


def _graph(kinds: set[str], unit=lambda m: m) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for name, found in IMPORTS.items():
        for module, kind, _ in found:
            if kind in kinds and _ours(module) and unit(module) != unit(name):
                graph.setdefault(unit(name), set()).add(unit(module))
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                connect(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = set()
            while True:
                other = stack.pop()
                on_stack.discard(other)
                component.add(other)
                if other == node:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return found


def _where(source_prefix: str, target_prefix: str) -> list[str]:
    """'module:line -> imported (kind)' for every import from one prefix into another."""
    return [f"{name}:{line} -> {module} ({kind})"
            for name, found in IMPORTS.items()
            if name == source_prefix or name.startswith(source_prefix + ".")
            for module, kind, line in found
            if module == target_prefix or module.startswith(target_prefix + ".")]


def _explain(cycles: list[frozenset[str]], kinds: set[str], unit) -> str:
    """The imports that close each cycle, one per line, for the failure message."""
    return "\n".join(sorted({f"{name}:{line} -> {module} ({kind})"
                             for cycle in cycles for name, found in IMPORTS.items()
                             if unit(name) in cycle
                             for module, kind, line in found
                             if kind in kinds and _ours(module) and unit(module) in cycle
                             and unit(module) != unit(name)}))


ALL_KINDS = {"module level", "lazy", "type only"}


# -- the parser itself ---------------------------------------------------------------------------

def test_the_parser_tells_the_three_kinds_apart(tmp_path):
    source = tmp_path / "sample.py"
    source.write_text(
        "from __future__ import annotations\n"
        "from typing import TYPE_CHECKING\n"
        "import reportgen.errors\n"
        "try:\n    from reportgen.console import notice\nexcept ImportError:\n    pass\n"
        "if TYPE_CHECKING:\n    from reportgen.data.datasets import Dataset\n"
        "def f():\n    from reportgen.training import trainer\n"
        "    g = lambda: __import__('x')\n"
        "class C:\n    def m(self):\n        import reportgen.catalog as c\n")
    MODULES["reportgen._sample"] = source
    try:
        found = {(module, kind) for module, kind, _ in _imports(source) if _ours(module)}
    finally:
        del MODULES["reportgen._sample"]
    assert found == {("reportgen.errors", "module level"), ("reportgen.console", "module level"),
                     ("reportgen.data.datasets", "type only"),
                     ("reportgen.training.trainer", "lazy"), ("reportgen.catalog", "lazy")}


def test_cycle_finder_finds_a_cycle_and_only_that():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": {"e"}, "e": set()}
    assert _cycles(graph) == [frozenset({"a", "b", "c"})]
    assert _cycles({"a": {"b"}, "b": set()}) == []


# -- the rules -----------------------------------------------------------------------------------

def test_model_folder_imports_only_errors_settings_and_the_standard_library():
    found = IMPORTS["reportgen.model_folder"]
    ours = sorted({m for m, _, _ in found if _ours(m)})
    assert ours and all(m == "reportgen.errors" or m.startswith("reportgen.settings.")
                        for m in ours), ours
    foreign = sorted({m.split(".")[0] for m, _, _ in found if not _ours(m)}
                     - set(sys.stdlib_module_names))
    assert foreign == [], f"model_folder imports third-party modules: {foreign}"


def test_importing_model_folder_loads_no_training_catalog_commands_or_tensorflow():
    code = ("import sys, reportgen.model_folder\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras')\n"
            "      or m.startswith(('reportgen.training', 'reportgen.catalog', "
            "'reportgen.commands'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=PACKAGE.parent).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("upper", ["reportgen.catalog", "reportgen.commands", "reportgen.cli",
                                   "reportgen.api"])
def test_training_never_imports_the_layers_above_it(upper):
    assert _where("reportgen.training", upper) == []


@pytest.mark.parametrize("granularity", ["subpackage", "module"])
def test_no_cycle_through_module_level_imports(granularity):
    unit = _unit if granularity == "subpackage" else (lambda m: m)
    cycles = _cycles(_graph({"module level"}, unit=unit))
    assert cycles == [], f"import cycle:\n{_explain(cycles, {'module level'}, unit)}"


@pytest.mark.parametrize("granularity", ["module", "subpackage"])
def test_lazy_imports_close_no_new_cycle(granularity):
    unit = _unit if granularity == "subpackage" else (lambda m: m)
    new = [c for c in _cycles(_graph(ALL_KINDS, unit=unit)) if c not in KNOWN_LAZY_CYCLES]
    assert new == [], ("an import cycle through lazy or type-only imports; break it or, if it "
                       "is not yours, list it in KNOWN_LAZY_CYCLES with its reason:\n"
                       + _explain(new, ALL_KINDS, unit))


def test_the_catalog_reads_the_layout_from_model_folder_and_sits_above_training():
    catalog = {m for m, _, _ in IMPORTS["reportgen.catalog"]}
    assert "reportgen.model_folder" in catalog
    assert _where("reportgen.model_folder", "reportgen.catalog") == []
    assert _where("reportgen.model_folder", "reportgen.training") == []
