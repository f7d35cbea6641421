"""The child processes of a run: spawned, dying with their parent, restarted when they die, and
stopped without hanging (`Supervisor`; docs/architecture.md#processes-and-roles-commonlauncherslaunchpy)."""

import ctypes
import dataclasses
import multiprocessing
import multiprocessing.synchronize
import os
import signal
import sys
import time
import traceback
from multiprocessing.process import BaseProcess
from typing import Any, Callable, Sequence


def _die_with_parent() -> None:
    """Has the kernel SIGTERM this process when its parent dies (Linux). `acting.ShouldStop`
    notices a dead parent only between steps; a child blocked in C++ (a Reverb call to a server
    that died with the launcher retries forever) would otherwise outlive a SIGKILLed launcher."""
    if not sys.platform.startswith("linux"):
        return
    pr_set_pdeathsig = 1  # <linux/prctl.h>
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
    parent = multiprocessing.parent_process()
    assert parent is not None  # a spawned child
    if os.getppid() != parent.pid:
        os._exit(1)  # the parent died before the request took effect


def _child_main(target: Callable, kwargs: dict) -> None:
    """Entry point of every spawned child: dies with its parent, ignores Ctrl-C, reports crashes
    with a traceback."""
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        target(**kwargs)
    except BaseException:  # the supervisor restarts on the non-zero exit code
        traceback.print_exc()
        os._exit(1)


@dataclasses.dataclass
class _Child:
    target: Callable
    kwargs: dict
    reseed: Callable[[dict, int], dict] | None
    stop: Any = None  # the child's stop event
    process: BaseProcess | None = None  # set when launched
    started: float = 0.0
    restarts: int = 0

    def launched(self) -> BaseProcess:
        """The child's process (`Supervisor.start` launches every child it adds)."""
        if self.process is None:
            raise RuntimeError("the child was never launched")
        return self.process


class Supervisor:
    """Starts named children, restarts the ones that die, and stops some or all of them without
    hanging."""

    def __init__(self, restart_delay_s: float = 1.0) -> None:
        self._context = multiprocessing.get_context("spawn")
        self._children: dict[str, _Child] = {}
        # choice: at most one restart per child per delay, so a crash loop cannot spin
        self._restart_delay_s = restart_delay_s

    def event(self) -> multiprocessing.synchronize.Event:
        return self._context.Event()

    def start(
        self,
        name: str,
        target: Callable,
        kwargs: dict,
        reseed: Callable[[dict, int], dict] | None = None,
    ) -> None:
        """Starts `target(**kwargs, stop=event)` in a spawned process. `reseed(kwargs, n)` gives
        the kwargs of the n-th restart (e.g. new env seeds)."""
        self._children[name] = _Child(target, kwargs, reseed, stop=self._context.Event())
        self._launch(name)

    def _launch(self, name: str) -> None:
        child = self._children[name]
        kwargs = dict(child.kwargs, stop=child.stop)
        if child.reseed is not None and child.restarts:
            kwargs = child.reseed(kwargs, child.restarts)
        child.process = self._context.Process(
            target=_child_main, args=(child.target, kwargs), name=name, daemon=True
        )
        child.process.start()
        child.started = time.monotonic()

    def process(self, name: str) -> BaseProcess:
        return self._children[name].launched()

    def restarts(self, name: str) -> int:
        return self._children[name].restarts

    def restart_dead(self) -> list[str]:
        """Restarts the children that exited (unless stopping); returns their names."""
        restarted = []
        for name, child in self._children.items():
            process = child.launched()
            if (
                child.stop.is_set()
                or process.is_alive()
                or time.monotonic() - child.started < self._restart_delay_s
            ):
                continue
            print(f"[launch] {name} exited (code {process.exitcode}); restarting", flush=True)
            child.restarts += 1
            self._launch(name)
            restarted.append(name)
        return restarted

    def names(self) -> list[str]:
        return list(self._children)

    def stop(self, timeout_s: float = 10.0, names: Sequence[str] | None = None) -> None:
        """Sets the stop events of the children `names` (default: all), then escalates to
        SIGTERM and SIGKILL per child."""
        children = [self._children[n] for n in (self._children if names is None else names)]
        for child in children:
            child.stop.set()
        deadline = time.monotonic() + timeout_s
        for child in children:
            child.launched().join(max(0.0, deadline - time.monotonic()))
        for child in children:
            process = child.launched()
            if process.is_alive():
                process.terminate()
                process.join(2.0)
            if process.is_alive():
                process.kill()
                process.join(2.0)
