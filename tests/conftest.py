"""Test-wide setup: `common` first, so TensorFlow loads with the project's oneDNN default
(common/__init__.py) in every test process, whatever a test module imports first.

Under pytest-xdist (`./dev.sh test` runs one worker per core with `--dist loadgroup`) the `slow`
tests, each of which starts its own launcher, actors, Reverb server and learner, share one group
and so run one at a time on one worker while the other workers take the in-process tests: two
multi-process runs at once on a 2-core machine would only slow both."""

import pytest

import common  # noqa: F401


# tryfirst: xdist's own hook turns the group mark into the node id's "@group" suffix, which is
# what `--dist loadgroup` schedules by, so the mark must be there before that hook runs.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    for item in items:
        if item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.xdist_group("processes"))
