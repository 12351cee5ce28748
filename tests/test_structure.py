"""The package's shape: imports point downward only, and the floor imports nothing above it."""

import ast
from pathlib import Path

import kbfilter

ROOT = Path(kbfilter.__file__).parent


def _module_name(path):
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path, modules):
    """Every kbfilter module ``path`` imports, at module level or inside a function."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            # "from .pkg import module" imports the submodule when there is one
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        else:
            continue
        found.update(t for t in targets if t in modules)
    found.discard(name)
    return found


def _graph():
    paths = {_module_name(p): p for p in ROOT.rglob("*.py")}
    return {name: _imports(path, paths) for name, path in paths.items()}


def test_the_import_graph_has_no_cycle():
    graph = _graph()
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                cycle = stack[stack.index(nxt):] + [nxt]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node)


def test_the_floor_imports_nothing_from_kbfilter():
    graph = _graph()
    # the input checks stand alone; save and load use them and nothing else of the library
    assert graph["kbfilter._validation"] == set()
    assert graph["kbfilter.persistence"] <= {"kbfilter._validation"}


def test_rules_know_nothing_about_filters_and_filters_nothing_about_the_command_line():
    graph = _graph()
    for name, imported in graph.items():
        if name.startswith("kbfilter.rules"):
            assert not any(m.startswith(("kbfilter.filters", "kbfilter.tuning", "kbfilter.bench")) for m in imported)
        if name.startswith(("kbfilter.filters", "kbfilter.rules", "kbfilter.tuning")):
            assert not any(m.startswith(("kbfilter.cli", "kbfilter.bench")) for m in imported), name


def test_the_benchmark_the_plots_and_the_datasets_load_on_first_use():
    import subprocess
    import sys

    code = ("import sys, kbfilter as kb\n"
            "assert 'kbfilter.bench' not in sys.modules and 'matplotlib' not in sys.modules\n"
            "assert 'kbfilter.datasets' not in sys.modules\n"
            "assert callable(kb.bench.run_bench) and callable(kb.plots.plot_frames)\n"
            "assert callable(kb.datasets.load_solent)\n"
            "try:\n    kb.no_such_name\nexcept AttributeError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "no attribute 'no_such_name'" in out


# the modules that define a filter (a class the user runs), as opposed to the components they compose
FILTER_MODULES = {"kbfilter.filters.kbf", "kbfilter.filters.kmc", "kbfilter.filters.nearest",
                  "kbfilter.filters.classical", "kbfilter.filters.window", "kbfilter.filters.motion"}


def test_the_filter_modules_are_the_ones_defining_filters():
    import inspect

    from kbfilter.filters.base import Filter

    defining = {cls.__module__ for name in kbfilter.filters.__all__
                for cls in [getattr(kbfilter.filters, name)] if inspect.isclass(cls) and issubclass(cls, Filter)}
    assert defining == FILTER_MODULES


def test_no_filter_module_imports_another_and_the_kbf_module_exports_only_its_filter():
    import kbfilter.filters.kbf as kbf_module

    graph = _graph()
    for name in FILTER_MODULES:
        assert not graph[name] & (FILTER_MODULES - {name}), name
    assert sorted(kbf_module.__all__) == ["FilterModel", "KernelBayesFilter"]


def test_the_filters_stand_on_at_most_three_floors():
    graph = _graph()
    inside = {name for name in graph if name.startswith("kbfilter.filters.")}

    def floor(name):
        below = [floor(m) for m in graph[name] if m in inside]
        return 1 + max(below, default=0)

    floors = {name: floor(name) for name in inside}
    assert max(floors.values()) <= 3, floors


def test_tuning_asks_the_filter_for_its_grid_and_imports_no_filter():
    graph = _graph()
    assert not graph["kbfilter.tuning"] & FILTER_MODULES
    source = (ROOT / "tuning.py").read_text()
    assert "isinstance(filter" not in source


def test_the_dependency_floors_are_the_versions_pinned_as_the_oldest_tested():
    """pyproject.toml's floors and .ci/minimum-versions.txt, the environment that checks them, name the
    same packages, and each pin is its floor's release line (a floor raised without the pins, or the
    pins without the floor, fails here)."""
    import re

    root = Path(__file__).resolve().parent.parent
    listed = re.search(r"^dependencies = \[(.*?)\]", (root / "pyproject.toml").read_text(), re.S | re.M).group(1)
    floors = dict(re.findall(r'"([A-Za-z0-9_.-]+)>=([0-9.]+)"', listed))
    pins = dict(re.findall(r"^([A-Za-z0-9_.-]+)==([0-9.]+)$", (root / ".ci" / "minimum-versions.txt").read_text(),
                           re.M))
    assert floors and floors.keys() == pins.keys()
    for name, floor in floors.items():
        floor_parts = [int(p) for p in floor.split(".")]
        pin_parts = [int(p) for p in pins[name].split(".")]
        assert pin_parts[:len(floor_parts)] == floor_parts, (name, floor, pins[name])
