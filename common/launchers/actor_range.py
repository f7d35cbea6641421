"""Actor indices across hosts: each `--role=actor` host's claim on its range of cluster-wide
actor indices (`common.launchers.launch._run_actor_fleet` holds one;
docs/architecture.md#processes-and-roles-commonlauncherslaunchpy).

choice: each `--role=actor` host claims its range [first_actor, first_actor + num_actors) in a
one-item table on the replay server (`ACTOR_CLAIMS_TABLE`, `parameters.params_table`'s layout: a
new insert evicts the old item), which holds the list of every host's claim as JSON: the range,
the host name, the supervisor's pid and the wall time of its last heartbeat. The replay server
is the one process every host already reaches, so no other service is needed. A supervisor
reads the list, refuses to start (`ActorRangeError`) if a live claim of another supervisor
overlaps its range, and writes the list back with its own claim and without the dead ones. It
does so again after `CLAIM_SETTLE_S` before starting its actors, and every `CLAIM_HEARTBEAT_S`
while they run. A claim is dead once its heartbeat is older than `CLAIM_EXPIRY_S`, and at once
if it names this host and a pid that no longer runs here (a supervisor killed with kill -9 and
started again takes its range back immediately; one on another host waits for the expiry).
Read-modify-write is not atomic: two hosts that read the list at the same moment may both
write, and the later write drops the earlier claim. The invariant that makes this safe: a
supervisor adds its claim only to a list in which no live claim overlaps it, so the list never
holds two overlapping live claims; a supervisor whose claim is missing from the list while an
overlapping live claim is in it has lost the race and stops with the same error, at its
settle check (before any actor starts) or at the latest at its next heartbeat.

The launchers that start actors themselves claim their range too (`ActorRange.held`, from a
thread beside the learner's loop or Ray's driver): `--role=local` and `--launcher=ray` hold
actors 0..num_actors-1 on their own server, so an actor host started by hand against it with an
overlapping --first_actor is refused, as against another actor host.
"""

import contextlib
import dataclasses
import json
import os
import socket
import threading
import time
from typing import Callable, Iterator

import numpy as np
import reverb

from common.replay import replay

from common.replay import parameters

ACTOR_CLAIMS_TABLE = "actor_claims"
# choice: the actor fleet's reachability check already ran every 5 s; it is the heartbeat now.
CLAIM_HEARTBEAT_S = 5.0
# choice: six missed heartbeats, so a loaded host keeps its range; claims carry the writer's
# wall clock, so the hosts' clocks must agree to well within this (as NTP keeps them).
CLAIM_EXPIRY_S = 30.0
# choice: far longer than one read-modify-write (milliseconds), so a race is lost before start.
CLAIM_SETTLE_S = 1.0


class ActorRangeError(Exception):
    """An actor host's --first_actor range overlaps a live host's (one line naming the flag)."""


@dataclasses.dataclass(frozen=True)
class ActorClaim:
    """One actor supervisor's claim on the actor indices [first, first + count)."""

    first: int
    count: int
    host: str
    pid: int
    heartbeat: float  # the writer's time.time() at its last heartbeat

    @property
    def end(self) -> int:
        return self.first + self.count

    def overlaps(self, other: "ActorClaim") -> bool:
        return self.first < other.end and other.first < self.end

    def describe(self) -> str:
        return f"actors {self.first}..{self.end - 1}"


def _running_here(pid: int) -> bool:
    """Whether a process with this pid runs on this host (a zombie counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


class ActorRange:
    """This supervisor's claim on actors [first, first + count) on the replay server at
    `address` (the design above). `clock`, `host` and `pid` are this supervisor's (tests give
    others)."""

    def __init__(
        self,
        address: str,
        first: int,
        count: int,
        expiry_s: float = CLAIM_EXPIRY_S,
        clock: Callable[[], float] = time.time,
        host: str | None = None,
        pid: int | None = None,
    ) -> None:
        self.address = address
        self.first, self.count = first, count
        self.expiry_s = expiry_s
        self.clock = clock
        self.host = socket.gethostname() if host is None else host
        self.pid = os.getpid() if pid is None else pid
        self.lost: str | None = None  # `held`: why another host won the range

    def _mine(self, claim: ActorClaim) -> bool:
        return (claim.host, claim.pid) == (self.host, self.pid)

    def _live(self, claim: ActorClaim, now: float) -> bool:
        if now - claim.heartbeat > self.expiry_s:
            return False
        return claim.host != self.host or _running_here(claim.pid)

    def claims(self) -> list[ActorClaim]:
        """Every claim on the server, dead ones included. ConnectionError if the server does not
        answer (reverb.DeadlineExceededError if it stops answering midway)."""
        return self._read(replay.connect(self.address, timeout_s=5.0))

    def _read(self, client: reverb.Client) -> list[ActorClaim]:
        subscriber = parameters.ParamsSubscriber(client, ACTOR_CLAIMS_TABLE, sample_timeout_s=5.0)
        try:
            latest = subscriber.latest(timeout_ms=5000)
        except ValueError:  # no such table
            raise ActorRangeError(
                f"--replay_address={self.address} has no {ACTOR_CLAIMS_TABLE} table: actor "
                "hosts join a Reverb server this code's --role=replay started"
            ) from None
        if latest is None:
            return []
        return [ActorClaim(**claim) for claim in json.loads(latest.weights[0].tobytes())]

    def _write(self, client: reverb.Client, claims: list[ActorClaim]) -> None:
        data = json.dumps([dataclasses.asdict(claim) for claim in claims]).encode()
        # A writer per write: a column's shape is fixed for a writer's life, the list's is not.
        publisher = parameters.ParamsPublisher(client, ACTOR_CLAIMS_TABLE, timeout_ms=5000)
        try:
            publisher.publish(0, 0, [np.frombuffer(data, np.uint8)])  # step, frames: unused
        finally:
            publisher.close()

    def heartbeat(self) -> None:
        """Claims the range, or refreshes the claim; ActorRangeError if this supervisor's claim
        is not on the server while a live one of another overlaps it."""
        client = replay.connect(self.address, timeout_s=5.0)
        now = self.clock()
        mine = ActorClaim(self.first, self.count, self.host, self.pid, now)
        claims = self._read(client)
        others = [c for c in claims if not self._mine(c) and self._live(c, now)]
        if not any(self._mine(c) for c in claims):
            conflicts = [c for c in others if c.overlaps(mine)]
            if conflicts:
                raise ActorRangeError(self._refusal(mine, conflicts[0], others, now))
        self._write(client, others + [mine])

    def _refusal(self, mine, holder, others, now) -> str:
        free = max(c.end for c in others)
        return (
            f"--first_actor={self.first} with --num_actors={self.count}: {mine.describe()} "
            f"overlap {holder.describe()} of the live actor host {holder.host} (pid "
            f"{holder.pid}, heartbeat {now - holder.heartbeat:.0f} s ago); give each actor host "
            f"a range no live host holds (from --first_actor={free} on all are free), or wait "
            f"{self.expiry_s:.0f} s after a dead host's last heartbeat"
        )

    def acquire(self, settle_s: float = CLAIM_SETTLE_S) -> None:
        """Claims the range and checks, `settle_s` later, that no concurrent claim won it."""
        self.heartbeat()
        time.sleep(settle_s)
        self.heartbeat()

    def release(self) -> None:
        """Drops this supervisor's claim, if it still holds one (best effort: the server may be
        gone)."""
        try:
            client = replay.connect(self.address, timeout_s=5.0)
            claims = self._read(client)
            if any(self._mine(c) for c in claims):
                self._write(client, [c for c in claims if not self._mine(c)])
        except (ConnectionError, reverb.DeadlineExceededError):
            pass

    @contextlib.contextmanager
    def held(self, interval_s: float = CLAIM_HEARTBEAT_S) -> Iterator["ActorRange"]:
        """Claims the range (`acquire`), renews it from a thread every `interval_s` while the
        block runs, and releases it after. For a launcher whose own loop is busy elsewhere (the
        learner's, Ray's driver): if another host wins the range, the thread stops renewing and
        `self.lost` holds the refusal, which that loop checks. A server that stops answering
        is not an error here: the run that owns it is ending."""
        self.acquire()
        done = threading.Event()

        def renew() -> None:
            while not done.wait(interval_s):
                try:
                    self.heartbeat()
                except (ConnectionError, reverb.DeadlineExceededError):
                    pass
                except ActorRangeError as error:
                    self.lost = str(error)
                    return

        thread = threading.Thread(target=renew, name="actor-range", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            done.set()
            thread.join()
            self.release()
