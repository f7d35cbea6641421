"""The tree is formatted by the project's one formatter (`ruff format`, configured in
pyproject.toml): run `.venv/bin/ruff format .` before committing."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_every_python_file_is_formatted():
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--check", ROOT],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout + result.stderr
