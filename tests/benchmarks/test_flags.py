"""Every benchmark defines its flags when it runs, as the papers' mains do: importing all of them
into one process defines none, so they import side by side (and into tests) without clashing."""

import ast
import os
import subprocess
import sys

import benchmarks

CODE = """
import importlib, pkgutil
import benchmarks
from absl import flags
names = sorted(m.name for m in pkgutil.iter_modules(benchmarks.__path__))
for name in names:
    importlib.import_module(f"benchmarks.{name}")
print(len(names))
print(sorted(m for m in flags.FLAGS.flags_by_module_dict() if m.startswith("benchmarks")))
"""


def test_importing_every_benchmark_defines_no_flag():
    result = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    count, defined = result.stdout.strip().splitlines()[-2:]
    assert int(count) >= 15  # the benchmarks were found and imported
    assert defined == "[]"


def main_block_calls(tree: ast.Module) -> bool:
    """Whether the module ends in `if __name__ == "__main__":` whose body calls `main`, directly
    or through `app.run(main)` or a lambda around it."""
    for node in tree.body:
        if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
            return any(
                isinstance(n, ast.Name) and n.id == "main"
                for statement in node.body
                for n in ast.walk(statement)
            )
    return False


def test_every_benchmark_with_a_main_runs_it_as_a_script():
    # `python -m benchmarks.minatar` once exited 0 having done nothing: its `__main__` block was
    # lost in a split, and the protocol tool then went through four trials in seconds.
    package = list(benchmarks.__path__)[0]
    with_main = []
    for name in sorted(os.listdir(package)):
        if not name.endswith(".py"):
            continue
        with open(os.path.join(package, name)) as f:
            tree = ast.parse(f.read())
        if any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in tree.body):
            with_main.append(name)
            assert main_block_calls(tree), f"benchmarks/{name} defines main but never runs it"
    assert len(with_main) >= 12 and "minatar.py" in with_main


def test_the_minatar_grid_tool_runs_as_a_script():
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.minatar", "--agents=nobody"],
        capture_output=True,
        text=True,
    )
    assert result.returncode != 0
    assert "--agents" in result.stderr + result.stdout
