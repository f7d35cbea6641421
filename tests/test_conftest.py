"""tests/conftest.py's promise: under `./dev.sh test` (pytest-xdist, `--dist loadgroup`) the
`slow` tests form `SLOW_GROUPS` groups, each run one test at a time on one worker, so no more
than that many run at once, whatever the number of workers. Checked on a throwaway suite with
the real hook: pytest 9.2 silently broke xdist 3.8's grouping (its node ids ignore xdist's group
suffix), and the slow tests then ran as many at a time as there were workers."""

import collections
import os
import re
import subprocess
import sys

from tests.conftest import SLOW_GROUPS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKERS = 4  # more than the groups: without the groups, the slow tests would spread over all

SUITE = """
import os
import time

import pytest


@pytest.mark.slow
@pytest.mark.parametrize("i", range(6))
def test_slow(i):
    start = time.time()
    time.sleep(0.5)
    with open(os.path.join(os.path.dirname(__file__), f"slow_{i}.txt"), "w") as f:
        f.write(f"{start} {time.time()}")


@pytest.mark.parametrize("i", range(4))
def test_fast(i):
    time.sleep(0.3)
"""


def test_slow_tests_form_groups_that_each_run_on_one_worker(tmp_path):
    (tmp_path / "conftest.py").write_text(
        "from tests.conftest import pytest_collection_modifyitems  # noqa: F401\n"
    )
    (tmp_path / "test_suite.py").write_text(SUITE)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", str(WORKERS)]
        + ["--dist", "loadgroup", "-v", "-W", "ignore::pytest.PytestUnknownMarkWarning"]
        + ["--rootdir", str(tmp_path), str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=ROOT),
        timeout=240,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    # Each slow test carries its group in its node id, and a group's tests share one worker.
    ran = re.findall(r"\[(gw\d+)\] .*PASSED \S*::test_slow\[\d+\]@(processes\d+)", result.stdout)
    assert len(ran) == 6, result.stdout
    workers = collections.defaultdict(set)
    for worker, group in ran:
        workers[group].add(worker)
    assert sorted(workers) == [f"processes{g}" for g in range(SLOW_GROUPS)], result.stdout
    assert all(len(w) == 1 for w in workers.values()), workers
    # So no more than SLOW_GROUPS slow tests ran at any moment.
    spans = [tuple(map(float, (tmp_path / f"slow_{i}.txt").read_text().split())) for i in range(6)]
    at_once = max(sum(start <= t < end for start, end in spans) for t, _ in spans)
    assert at_once <= SLOW_GROUPS, spans
