"""Test-wide setup: `common` first, so TensorFlow loads with the project's oneDNN default
(common/__init__.py) in every test process, whatever a test module imports first.

Under pytest-xdist (`./dev.sh test` runs one worker per core with `--dist loadgroup`) the `slow`
tests, each of which starts its own launcher, actors, Reverb server and learner, are dealt into
`SLOW_GROUPS` groups in collection order; a group runs one test at a time on one worker, so at
most `SLOW_GROUPS` end-to-end runs share the machine, however many workers it has. xdist hands
out the largest groups first, so on two workers each starts on one group and takes the
in-process tests when its group is done."""

import pytest

import common  # noqa: F401

# choice: two, one per core of the 2-core machines the suite is sized for. With one group (until
# 2026-11-26) the slow tests were the suite's critical path (~29 min of a 29-minute suite).
SLOW_GROUPS = 2


# tryfirst: xdist's own hook turns the group mark into the node id's "@group" suffix, which is
# what `--dist loadgroup` schedules by, so the mark must be there before that hook runs.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    slow = [item for item in items if item.get_closest_marker("slow")]
    for i, item in enumerate(slow):
        item.add_marker(pytest.mark.xdist_group(f"processes{i % SLOW_GROUPS}"))
