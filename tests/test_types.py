"""The tree type-checks: mypy (pinned in setup.cfg's test extra) over the files its settings in
pyproject.toml name (`common/`, the five papers and `benchmarks/`) reports no error. Every public
function there has types, and a checked annotation is one that stays true: a Builder method that
returns the wrong thing, or a None that slips through where a value is assumed, fails here
instead of hours into a run. Run it by hand with `.venv/bin/mypy` from the repository root."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_mypy_reports_no_error():
    result = subprocess.run(
        [sys.executable, "-m", "mypy"], capture_output=True, text=True, cwd=ROOT
    )
    assert result.returncode == 0, result.stdout + result.stderr
