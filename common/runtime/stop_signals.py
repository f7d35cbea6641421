"""Ctrl-C and SIGTERM as exceptions that end a run cleanly, from the first line of a paper's main.

A run installs the handlers (`install`) before it imports anything heavy, so that a stop that
arrives while TensorFlow imports ends the run as one that arrives while it trains: one console
line, exit status 0 and, once the learner exists, a checkpoint (`common.launchers.launch`). Light
on purpose: no TensorFlow, no numpy."""

import contextlib
import signal
from collections.abc import Iterator


class Terminated(BaseException):
    """SIGTERM, turned into an exception so that shutdown checkpoints like Ctrl-C does. A
    BaseException, as KeyboardInterrupt is, so that a library's `except Exception:` lets it
    through."""


# The stop signals this process has received.
received: list[int] = []
# False while the learner trains (`recorded_only`).
_raise_on_stop = True


def install() -> None:
    """Ctrl-C raises KeyboardInterrupt (even if started with SIGINT ignored, as `nohup` and
    background jobs are); SIGTERM raises Terminated, except within `recorded_only`. Both end in
    the same clean shutdown, and both are recorded in `received`."""

    def stop(signum, frame):
        received.append(signum)
        if _raise_on_stop:
            raise _exception(signum)

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)


def _exception(signum: int) -> BaseException:
    return KeyboardInterrupt() if signum == signal.SIGINT else Terminated()


@contextlib.contextmanager
def recorded_only() -> Iterator[None]:
    """Within the block a stop signal is recorded, not raised: the learner polls for it between
    steps (and every `sample_timeout_ms` while it waits), so the exception cannot land inside a
    checkpoint being written, where it left the shutdown checkpoint unwritten."""
    global _raise_on_stop
    _raise_on_stop = False
    try:
        yield
    finally:
        _raise_on_stop = True


def raise_recorded() -> None:
    """Raises the exception of a stop signal this process has recorded: one that was only
    recorded (`recorded_only`), or one whose exception a library swallowed. MinAtar's bare
    `except:` around its matplotlib import, a window of about a second at every start, is one; a
    run stopped there went on training until the grid runner's SIGKILL, without a checkpoint."""
    if received:
        raise _exception(received[0])
