"""The package's shape, as ARCHITECTURE.md states it: no import cycles between fastload's modules (imports
inside functions counted), a core that knows no front end, and no library file over 800 lines -- but for
the exceptions listed below, each named with its reason."""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = {"fastload": ROOT / "fastload", "fastload.kernels": ROOT / "kernels"}
MAX_LINES = 800
# The known exceptions, each named so that nothing new joins it: a new cycle or a new long file
# fails, and so does one of these once mended (then delete its line).
KNOWN_CYCLES: list[list[str]] = []
KNOWN_LONG: dict[str, int] = {}


def _modules() -> dict[str, pathlib.Path]:
    modules = {}
    for package, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join([package, *parts])] = path
    return modules


def _extensions() -> set[str]:
    """The C extension modules (``fastload/_jpeg.c`` is ``fastload._jpeg``): modules an import may name, which
    import no fastload module themselves."""
    return {".".join(["fastload", *path.relative_to(ROOT / "fastload").with_suffix("").parts])
            for path in (ROOT / "fastload").rglob("*.c")}


def _imports(name: str, path: pathlib.Path, modules: dict) -> set[str]:
    """The fastload modules ``name`` imports anywhere in its file (functions included); a C extension is a
    module of its own, not its package."""
    modules = {**modules, **dict.fromkeys(_extensions())}
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            submodules = [f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in modules]
            targets = submodules if len(submodules) == len(node.names) else [base, *submodules]
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm, iteratively)."""
    index, low, on_stack, stack, components, counter = {}, {}, set(), [], [], [0]
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return components


def test_no_import_cycles():
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    assert sorted(_cycles(graph)) == KNOWN_CYCLES


def test_the_cycle_finder_finds_one():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_core_knows_no_front_end():
    modules = _modules()
    core = {name: path for name, path in modules.items()
            if not name.startswith(("fastload.compat", "fastload.cli"))}
    reaching = {name: sorted(t for t in _imports(name, path, modules) if t.startswith("fastload.compat"))
                for name, path in core.items()}
    assert {name: targets for name, targets in reaching.items() if targets} == {}
    named = [f"{name}: class {node.name}" for name, path in core.items()
             for node in ast.walk(ast.parse(path.read_text()))
             if isinstance(node, ast.ClassDef) and node.name.lower().startswith(("dali", "rocal"))]
    assert named == []


def test_no_library_file_over_800_lines():
    sizes = {str(path.relative_to(ROOT)): len(path.read_text().splitlines()) for path in _modules().values()}
    assert {path: lines for path, lines in sizes.items() if lines > MAX_LINES} == KNOWN_LONG


def _private_names(path: pathlib.Path, module: str) -> list[str]:
    """The underscored names ``path`` imports from ``module`` (``from module import _name``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.lstrip(".").endswith(
                module.rpartition(".")[2]):
            found += [alias.name for alias in node.names if alias.name.startswith("_")]
    return found


def test_the_front_ends_share_a_neutral_engine():
    """DALI's layer does not import rocAL's, the shared engine imports neither, and rocAL's layer (built on
    DALI's pipeline) takes no private name of DALI's."""
    modules = _modules()
    imports = {name: _imports(name, path, modules) for name, path in modules.items()}
    dali, rocal, engine = "fastload.compat.dali", "fastload.compat.rocal", "fastload.compat.engine"
    assert {name: sorted(t for t in targets if t.startswith(rocal))
            for name, targets in imports.items() if name.startswith(dali) and
            any(t.startswith(rocal) for t in targets)} == {}
    assert {name: sorted(t for t in targets if t.startswith((dali, rocal)))
            for name, targets in imports.items() if name.startswith(engine) and
            any(t.startswith((dali, rocal)) for t in targets)} == {}
    private = {f"{name} -> {target}": _private_names(modules[name], target)
               for name, targets in imports.items() if name.startswith(rocal)
               for target in targets if target.startswith(dali)}
    assert {edge: names for edge, names in private.items() if names} == {}
