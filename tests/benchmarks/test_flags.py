"""Every benchmark defines its flags when it runs, as the papers' mains do: importing all of them
into one process defines none, so they import side by side (and into tests) without clashing."""

import subprocess
import sys

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
