"""The package's layout holds: the layer order, no import cycle, every package shipped.

A run flows through four layers (docs/architecture.md), and a module imports only modules of
its own layer or of earlier ones. The folder a module sits in is its layer::

    core -> model, store -> backends -> render -> commands, the public API
                         \\-> analyze -/

* ``core``: errors, units, values, streams, signals, padding policies (pure helpers everything
  may use);
* ``model`` and ``store``: the run in memory and on disk, which frames are the user's
  (``model.ownership``), the user's source (``model.source_files``);
* ``backends``: the collectors, their runtimes and the runner (its ``__init__`` is the
  registry: plain data, imported by the model); ``analyze``: pure functions of a run, with the
  wording of each backend (``analyze.wording``). Neither imports the other;
* ``render``: reports as text, JSON, HTML, plots, each from a typed object;
* ``app``: ``commands/`` (one module per command, with what only commands use: the console,
  progress, the TensorBoard server, the compare driver), ``cli`` (the group and the exit-code
  boundary), the public API (``lazyscope/__init__``), ``data`` (the collators and samplers users
  paste) and ``integrations``.

Every ``import`` counts, including those inside functions (a cycle hidden in a function is
still a cycle), and so does the package ``__init__`` that importing a submodule runs, except the
root package's (the public facade, which Python runs before any ``lazyscope.x`` in every case).

The checker is tested on planted graphs below, so this test fails when a cycle or an upward
import is added.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import tomllib

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "lazyscope"

ORDER = {"base": 0, "model": 1, "collect": 2, "analyze": 2, "render": 3, "app": 4}
#: layers of the same rank that must not import each other
SIBLINGS = {frozenset({"collect", "analyze"})}
#: folder -> layer (the root's loose modules are the app); the longest match decides
LAYERS: dict[str, str] = {
    "lazyscope": "app",
    "lazyscope.commands": "app",
    "lazyscope.core": "base",
    "lazyscope.model": "model",
    "lazyscope.store": "model",
    "lazyscope.backends": "collect",
    "lazyscope.backends.__init__": "model",  # the registry: names and modules, imports no backend
    "lazyscope.analyze": "analyze",
    "lazyscope.render": "render",
}


def layer_of(module: str) -> str:
    """The layer of a module name (``pkg.__init__`` for a package's own code)."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        found = LAYERS.get(".".join(parts[:n]))
        if found is not None:
            return found
    raise KeyError(f"{module} is in no layer: add it to LAYERS in {__file__}")


def _module_name(path: Path, root: Path, top: str) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = [top, *rel.parts]
    return ".".join(parts)  # a package's own code is pkg.__init__


def _resolve(name: str, modules: set[str]) -> str | None:
    """The module file an imported name runs: ``a.b`` -> ``a.b`` or ``a.b.__init__``."""
    if name in modules:
        return name
    if f"{name}.__init__" in modules:
        return f"{name}.__init__"
    return None


def _parents(module: str, importer: str, modules: set[str]) -> list[str]:
    """The package ``__init__`` modules that importing ``module`` from ``importer`` runs: those
    of its packages that do not hold the importer too (those are running already), nor the
    root (see the module docstring)."""
    parts = module.split(".")
    out = []
    for n in range(2, len(parts)):
        package = ".".join(parts[:n])
        init = package + ".__init__"
        if init in modules and init != module and not importer.startswith(package + "."):
            out.append(init)
    return out


def import_graph(root: Path = PACKAGE, top: str = "lazyscope") -> dict[str, set[str]]:
    """``{module: modules it imports}`` over the package, every import statement included."""
    files = {_module_name(p, root, top): p for p in root.rglob("*.py")}
    modules = set(files)
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        package = module.rsplit(".", 1)[0] if not module.endswith(".__init__") else \
            module[: -len(".__init__")]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                names = [base] + [f"{base}.{a.name}" for a in node.names]
            for name in names:
                if not name.startswith(top):
                    continue
                found = _resolve(name, modules)
                if found is not None and found != module:
                    targets.add(found)
                    targets.update(_parents(found, module, modules))
        targets.discard(f"{top}.__init__")
        graph[module] = targets
    return graph


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """``importer -> imported`` for every import of a later layer (or a sibling layer)."""
    bad = []
    for module, targets in sorted(graph.items()):
        mine = layer_of(module)
        for target in sorted(targets):
            theirs = layer_of(target)
            if ORDER[theirs] > ORDER[mine] or (
                    theirs != mine and frozenset({mine, theirs}) in SIBLINGS):
                bad.append(f"{module} ({mine}) -> {target} ({theirs})")
    return bad


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles: strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


# --------------------------------------------------------------------------- the package


def test_no_module_imports_a_later_layer() -> None:
    assert upward_imports(import_graph()) == []


def test_no_import_cycle() -> None:
    assert cycles(import_graph()) == []


def test_every_module_has_a_layer() -> None:
    for module in import_graph():
        layer_of(module)


def test_every_package_directory_is_shipped() -> None:
    """pyproject lists its packages by hand (scenarios/ installs as lazyscope_scenarios): a new
    package directory must be listed there or the wheel lacks it."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    listed = set(config["tool"]["setuptools"]["packages"])
    mapping = config["tool"]["setuptools"]["package-dir"]
    found = set()
    for top, directory in [("lazyscope", "lazyscope"), *((k, v) for k, v in mapping.items())]:
        for init in (REPO / directory).rglob("__init__.py"):
            rel = init.parent.relative_to(REPO / directory)
            found.add(".".join([top, *rel.parts]))
    assert found == listed


# --------------------------------------------------------------------------- the checker


@pytest.fixture
def planted(tmp_path: Path):
    """A tiny package ``pkg`` in the layers' shape, to plant violations in."""

    def make(files: dict[str, str]) -> dict[str, set[str]]:
        for rel, text in files.items():
            path = tmp_path / "lazyscope" / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        return import_graph(tmp_path / "lazyscope")

    return make


CLEAN = {
    "__init__.py": "from lazyscope.cli import main\n",
    "cli.py": "from lazyscope.render import text\nfrom lazyscope.backends.runner import run\n",
    "backends/__init__.py": "",
    "backends/runner.py": "from lazyscope.model import frames\n",
    "model/__init__.py": "",
    "model/frames.py": "import json\n",
    "analyze/__init__.py": "",
    "analyze/report.py": "from lazyscope.model.frames import Frame\n",
    "render/__init__.py": "",
    "render/text.py": "from lazyscope.analyze import report\n",
}


def test_checker_passes_a_clean_package(planted) -> None:
    graph = planted(CLEAN)
    assert upward_imports(graph) == [] and cycles(graph) == []


def test_checker_finds_an_upward_import_even_inside_a_function(planted) -> None:
    graph = planted({**CLEAN, "model/frames.py": "def f():\n    from lazyscope.analyze import report\n"})
    assert upward_imports(graph) == [
        "lazyscope.model.frames (model) -> lazyscope.analyze.__init__ (analyze)",
        "lazyscope.model.frames (model) -> lazyscope.analyze.report (analyze)"]


def test_checker_finds_a_sibling_import(planted) -> None:
    graph = planted({**CLEAN, "analyze/report.py": "from lazyscope.backends.runner import run\n"})
    assert upward_imports(graph) == ["lazyscope.analyze.report (analyze) -> lazyscope.backends.runner (collect)"]


def test_checker_finds_a_cycle_within_a_layer(planted) -> None:
    graph = planted({**CLEAN, "model/frames.py": "from lazyscope.model import run\n",
                     "model/run.py": "from lazyscope.model.frames import Frame\n"})
    assert cycles(graph) == [["lazyscope.model.frames", "lazyscope.model.run"]]


def test_checker_counts_the_package_init_a_submodule_import_runs(planted) -> None:
    graph = planted({**CLEAN, "analyze/__init__.py": "from lazyscope.render import text\n"})
    assert "lazyscope.analyze.__init__ (analyze) -> lazyscope.render.text (render)" in \
        upward_imports(graph)
    # render.text imports analyze.report, which runs analyze/__init__, which imports render.text
    assert cycles(graph)


#: the frameworks only ``lazyscope/backends`` may import (docs/backends.md)
FRAMEWORKS = frozenset({"torch_xla", "jax", "jaxlib", "torchax", "optax"})


def test_only_the_backends_import_the_frameworks() -> None:
    """torch_xla, jax and torchax are imported in ``lazyscope/backends`` only (any import,
    inside functions too): the analysis and the renderers run where none is installed."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if (PACKAGE / "backends") in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.module and \
                not node.level else []
            found += [f"{path.relative_to(REPO)}:{node.lineno}: {n}" for n in names
                      if n.partition(".")[0] in FRAMEWORKS]
    assert not found, found
