"""The import structure of the ``unbroken`` package, read from the source with ``ast``.

Three rules, each failing with the offending imports as ``file:line``:

1. Packages import downward: symbolic < ir < frontend | passes < the package-root modules
   (``pipeline.py``, ``cli.py``, ...); frontend and passes never import each other.
2. Inside the frontend, every module belongs to one layer of ``unbroken.frontend.LAYERS`` and
   imports only modules of its own layer or a lower one.
3. There is no import cycle anywhere in ``unbroken/``.

Every import statement counts, function-local ones included: an import placed inside a
function to dodge a cycle is still a dependency.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import unbroken
from unbroken.frontend import LAYERS

PACKAGE = Path(unbroken.__file__).parent
ROOT = PACKAGE.parent

# Rank of each top-level subpackage; modules at the package root rank above all of them.
PACKAGE_RANK = {"symbolic": 0, "ir": 1, "frontend": 2, "passes": 2}
ROOT_RANK = 3
SIDEWAYS = {frozenset({"frontend", "passes"})}


@dataclass(frozen=True, slots=True)
class Import:
    """One import statement's edge: ``source`` imports ``target`` (dotted module names) at
    ``path:line``."""

    source: str
    target: str
    path: Path
    line: int

    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _targets(node, module: str, is_package: bool) -> list[str]:
    """The ``unbroken`` modules an import statement names (a name imported from a package is
    the submodule of that name when there is one, else the package itself)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == "unbroken"]
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[:len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    if target.split(".")[0] != "unbroken":
        return []
    return [f"{target}.{a.name}" if f"{target}.{a.name}" in MODULES else target
            for a in node.names]


def _imports() -> list[Import]:
    edges = []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in _targets(node, module, path.name == "__init__.py"):
                    if target != module:
                        edges.append(Import(module, target, path, node.lineno))
    return edges


IMPORTS = _imports()


def _package(module: str) -> str:
    """The top-level subpackage a module belongs to, or "<root>" for the package root."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in PACKAGE_RANK else "<root>"


def _rank(package: str) -> int:
    return PACKAGE_RANK.get(package, ROOT_RANK)


def test_packages_import_downward():
    bad = []
    for edge in IMPORTS:
        src, dst = _package(edge.source), _package(edge.target)
        if src == dst:
            continue
        if _rank(dst) > _rank(src) or frozenset({src, dst}) in SIDEWAYS:
            bad.append(f"{edge.where()}: {src} imports {edge.target}")
    assert not bad, ("imports against the layer order symbolic < ir < frontend | passes < "
                     "package root:\n" + "\n".join(bad))


FRONTEND_LAYER = {f"unbroken.frontend.{name}" if name else "unbroken.frontend": rank
                  for rank, (_, names) in enumerate(LAYERS) for name in names}


def test_every_frontend_module_has_a_layer():
    missing = sorted(m for m in MODULES if m.startswith("unbroken.frontend")
                     and m not in FRONTEND_LAYER)
    stale = sorted(m for m in FRONTEND_LAYER if m not in MODULES)
    assert not missing, f"frontend modules missing from unbroken.frontend.LAYERS: {missing}"
    assert not stale, f"unbroken.frontend.LAYERS names modules that do not exist: {stale}"


def test_frontend_imports_point_down():
    bad = []
    for edge in IMPORTS:
        if edge.source in FRONTEND_LAYER and edge.target in FRONTEND_LAYER:
            here, there = FRONTEND_LAYER[edge.source], FRONTEND_LAYER[edge.target]
            if there > here:
                bad.append(f"{edge.where()}: {edge.source} (layer {LAYERS[here][0]!r}) imports "
                           f"{edge.target} (layer {LAYERS[there][0]!r})")
    assert not bad, ("frontend imports against unbroken.frontend.LAYERS:\n" + "\n".join(bad))


def _is_public_api_call(edge: Import) -> bool:
    """A package-root module calling the public API through ``unbroken`` itself (``cases.py``
    runs ``unbroken.export`` so that the name users patch is the one called). The package
    ``__init__`` only re-exports, on first use, what the modules define; every other edge
    counts."""
    return edge.target == "unbroken" and _package(edge.source) == "<root>"


def _cycles(edges: list[Import]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for edge in edges:
        if edge.target in graph and not _is_public_api_call(edge):
            graph[edge.source].add(edge.target)
    index, low, stack, on_stack, result = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph[node]):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                result.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return result


def test_no_import_cycle():
    cycles = _cycles(IMPORTS)
    report = []
    for component in cycles:
        members = set(component)
        report.append(f"cycle of {len(component)} modules: {', '.join(component)}")
        report += [f"  {e.where()}: {e.source} imports {e.target}" for e in IMPORTS
                   if e.source in members and e.target in members]
    assert not cycles, "import cycles in unbroken/:\n" + "\n".join(report)


def test_the_checker_sees_function_local_imports():
    """The rules above would pass vacuously if imports inside functions were missed."""
    source = "def f():\n    from .variables.builder import wrap\n"
    node = ast.parse(source).body[0].body[0]
    assert _targets(node, "unbroken.frontend.translator", False) == \
        ["unbroken.frontend.variables.builder"]
    assert _cycles([Import("unbroken.cli", "unbroken.exporter.pipeline", Path(), 1),
                    Import("unbroken.exporter.pipeline", "unbroken.cli", Path(), 2)]) == \
        [["unbroken.cli", "unbroken.exporter.pipeline"]]
