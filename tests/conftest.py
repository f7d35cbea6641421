"""Test-wide setup: `common` first, so TensorFlow loads with the project's oneDNN default
(common/__init__.py) in every test process, whatever a test module imports first."""

import common  # noqa: F401
