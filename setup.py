"""Guard only: metadata lives in setup.cfg, the build system in pyproject.toml.

Stops an install on the wrong Python with the reason, before pip resolves anything.
"""

import sys

from setuptools import setup

if sys.version_info[:2] != (3, 11):
    sys.exit(
        f"This project needs Python 3.11, found {sys.version.split()[0]}: dm-reverb 0.14.0 ships "
        "wheels for CPython 3.9-3.11 only, and it works only with TensorFlow 2.15.x, which the "
        "project pins (tensorflow==2.15.1). Install Python 3.11 and rerun ./dev.sh."
    )

setup()
