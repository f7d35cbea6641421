"""`common/` is in layers (`common.LAYERS`, lowest first): every module sits in a layer's folder, imports
only from its own layer and the ones before it, and no chain of imports comes back to where it
started. Lazy imports inside functions count too. docs/architecture.md's module map names every
module of the tree and nothing else."""

import ast
import pathlib
import re

import common

ROOT = pathlib.Path(__file__).resolve().parents[1]
COMMON = ROOT / "common"


def _modules() -> dict[str, pathlib.Path]:
    """{"common.layer.module": path} of every module below common/ (packages' __init__ excluded)."""
    return {
        ".".join(path.relative_to(ROOT).with_suffix("").parts): path
        for path in sorted(COMMON.rglob("*.py"))
        if path.name != "__init__.py"
    }


def _imports(path: pathlib.Path, modules: set[str]) -> set[str]:
    """The modules of `modules` that the file at `path` imports, anywhere in it."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found & modules


def test_every_module_sits_in_a_layer_folder():
    loose = sorted(p.name for p in COMMON.glob("*.py") if p.name != "__init__.py")
    assert loose == [], f"modules outside a layer folder: {loose}"
    folders = sorted(p.name for p in COMMON.iterdir() if (p / "__init__.py").exists())
    assert folders == sorted(common.LAYERS)
    assert len(set(common.LAYERS)) == len(common.LAYERS)


def test_no_module_imports_from_a_higher_layer():
    modules = _modules()
    rank = {layer: i for i, layer in enumerate(common.LAYERS)}
    upward = []
    for name, path in modules.items():
        own = rank[name.split(".")[1]]
        for imported in _imports(path, set(modules)):
            if rank[imported.split(".")[1]] > own:
                upward.append(f"{name} imports {imported}")
    assert upward == []


def test_no_import_cycle():
    modules = _modules()
    graph = {name: _imports(path, set(modules)) - {name} for name, path in modules.items()}
    done, on_path, cycles = set(), [], []

    def visit(name):
        if name in on_path:
            cycles.append(" -> ".join(on_path[on_path.index(name) :] + [name]))
            return
        if name in done:
            return
        on_path.append(name)
        for imported in sorted(graph[name]):
            visit(imported)
        on_path.pop()
        done.add(name)

    for name in sorted(graph):
        visit(name)
    assert cycles == []


def test_the_layer_test_sees_an_upward_import(tmp_path):
    # The checks above read imports as this parser does; it finds both forms, at any depth.
    source = tmp_path / "m.py"
    source.write_text(
        "from common.experiments import cli\n"
        "def f():\n    import common.runtime.acting\n    from common.replay.replay import MASK\n"
    )
    found = _imports(source, set(_modules()))
    assert found == {
        "common.experiments.cli",
        "common.runtime.acting",
        "common.replay.replay",
    }


def test_the_architecture_map_names_every_module_and_nothing_else():
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text.split("## Module map", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`(common/[a-z_]+/[a-z_]+\.py)`", section))
    tree = {str(path.relative_to(ROOT)) for path in _modules().values()}
    assert sorted(tree - named) == [], "modules missing from docs/architecture.md's module map"
    assert sorted(named - tree) == [], "the map names modules the tree does not have"


def test_no_module_of_the_product_passes_600_lines():
    # The guide's rule for `common/`, the papers and the benchmarks (tests are exempt).
    packages = ["common", "impala", "reactor", "dice", "gdi", "lbc", "benchmarks"]
    long = {
        str(path.relative_to(ROOT)): count
        for package in packages
        for path in sorted((ROOT / package).rglob("*.py"))
        if (count := len(path.read_text().splitlines())) > 600
    }
    assert long == {}
