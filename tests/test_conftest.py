"""tests/conftest.py's promise: under `./dev.sh test` (pytest-xdist, `--dist loadgroup`) the
`slow` tests run one at a time on one worker. Checked on a throwaway suite with the real hook:
pytest 9.2 silently broke xdist 3.8's grouping (its node ids ignore xdist's group suffix), and
the slow tests then ran two at a time."""

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SUITE = """
import time

import pytest


@pytest.mark.slow
@pytest.mark.parametrize("i", range(4))
def test_slow(i):
    time.sleep(0.3)


@pytest.mark.parametrize("i", range(4))
def test_fast(i):
    time.sleep(0.3)
"""


def test_slow_tests_share_one_worker(tmp_path):
    (tmp_path / "conftest.py").write_text(
        "from tests.conftest import pytest_collection_modifyitems  # noqa: F401\n"
    )
    (tmp_path / "test_suite.py").write_text(SUITE)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2"]
        + ["--dist", "loadgroup", "-v", "-W", "ignore::pytest.PytestUnknownMarkWarning"]
        + ["--rootdir", str(tmp_path), str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=ROOT),
        timeout=240,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    workers = re.findall(r"\[(gw\d)\] .*PASSED .*::test_slow\[", result.stdout)
    assert len(workers) == 4 and len(set(workers)) == 1, result.stdout
