"""`python -m impala.main`, except that right after one function of its start returns (named by
the SWALLOWED_STOP_AT environment variable as `module:qualified.name`) it sends itself SIGTERM
inside a bare `except:`. That swallows the exception the launcher's handler raises, as
MinAtar's import of matplotlib does, or with SWALLOWED_STOP_AS=AttributeError raises that
instead, as TensorFlow's C++ can. tests/impala/test_system.py checks that the run stops all the
same.

Not a test module: pytest collects nothing here."""

import functools
import importlib
import os
import runpy
import signal
import time


def swallowing_a_stop(function):
    @functools.wraps(function)
    def wrapped(*args, **kwargs):
        result = function(*args, **kwargs)
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler raises in here, well before the end
        except:  # noqa: E722 (the point: a library's bare except)
            if os.environ.get("SWALLOWED_STOP_AS") == "AttributeError":
                raise AttributeError("'GlorotUniform' object has no attribute 'keys'") from None
        return result

    return wrapped


module_name, qualified_name = os.environ["SWALLOWED_STOP_AT"].split(":")
*owners, name = qualified_name.split(".")
owner = importlib.import_module(module_name)
for attribute in owners:
    owner = getattr(owner, attribute)
setattr(owner, name, swallowing_a_stop(getattr(owner, name)))
runpy.run_module("impala.main", run_name="__main__", alter_sys=True)
