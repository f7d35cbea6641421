"""Hosts that are really separate: two network namespaces joined by a veth pair, each with its own
network stack and address. Namespace A runs `--role=replay` and `--role=learner`, namespace B an
actor host (`--role=actor --first_actor=4`) that reaches the replay server only over the veth
pair. DiCE (a burn-in agent with per-game behaviour state; `system_helpers.FLEET_FLAGS` says why
this agent) trains on CartPole to a checkpoint; then the actor host's whole process group is
SIGKILLed and started again with the same command. The learner keeps its step and frames, the new
actors are actors 4 and 5 again (names, seeds, behaviour state files), their bandits continue from
the killed actors' files, and episodes.csv counts each game once. Then the learner is SIGKILLed
and resumed while the actor host plays on, and its actors' bandits roll back to the state the
resumed checkpoint kept.

Creating namespaces needs root and iproute2's `ip`; without them the test skips and says which
is missing, or, where the kernel refuses `ip netns add` even so, what it answered. CI's machine
runs as root with `ip` and creates them: the clean-clone `.ci/run`s of 2026-11-26 ran it (1,438,
1,444, 1,447 and 1,456 passed, none skipped)."""

import os
import re
import shutil
import signal
import subprocess

import pytest

from tests.system_helpers import (
    assert_the_run_went_on,
    episodes,
    bandit_counts,
    checkpoint_step,
    FLEET_FLAGS,
    FLEET_STARTUP_S,
    finish,
    fleet_flags,
    process_group,
    run_main,
    wait_until,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

ADDRESS_A, ADDRESS_B = "10.231.0.1", "10.231.0.2"  # choice: a private /24 unlikely to be in use
FIRST_ACTOR, NUM_ACTORS, ENVS, SEED = 4, 2, 4, 3
COMMON = fleet_flags(SEED, NUM_ACTORS, ENVS)
# The learner's console line (common.runtime.runlog): its step and the lag of its last batch, the
# step minus one minus the batch's mean params step (common.runtime.learning).
PROGRESS = re.compile(r"\] step (\d+) \|.* \| lag (-?[\d.]+) \|")

IP = shutil.which("ip")  # iproute2; usually /usr/sbin/ip


def _ip(*args: str) -> str:
    return subprocess.run(
        [IP, *args], check=True, capture_output=True, text=True, timeout=60
    ).stdout


def _missing_for_namespaces() -> str | None:
    if os.geteuid() != 0:
        return (
            f"network namespaces need root (`ip netns add`); this test runs as uid {os.geteuid()}"
        )
    if IP is None:
        return "network namespaces need iproute2's `ip` command, which is not on PATH"
    return None


@pytest.fixture(scope="module")
def namespaces(request) -> tuple[str, str]:
    """Namespaces A (10.231.0.1) and B (10.231.0.2), joined by a veth pair, each with its own
    loopback up; deleted (and their veth ends with them) when the module's tests end."""
    missing = _missing_for_namespaces()
    if missing:
        pytest.skip(missing)
    tag = os.getpid()  # parallel runs on one machine do not clash
    a, b = f"rl_a{tag}", f"rl_b{tag}"

    def delete():  # a namespace that was never made fails to delete, silently
        for ns in (a, b):
            subprocess.run([IP, "netns", "del", ns], check=False, capture_output=True, timeout=60)

    # Registered first: whatever fails below, both namespaces (and the veth pair) are deleted.
    request.addfinalizer(delete)
    try:
        _ip("netns", "add", a)
    except subprocess.CalledProcessError as error:
        pytest.skip(f"`ip netns add` failed although run as root: {error.stderr.strip()}")
    _ip("netns", "add", b)
    _ip("link", "add", f"va{tag}", "type", "veth", "peer", "name", f"vb{tag}")
    for ns, end, address in ((a, f"va{tag}", ADDRESS_A), (b, f"vb{tag}", ADDRESS_B)):
        _ip("link", "set", end, "netns", ns)
        _ip("-n", ns, "addr", "add", f"{address}/24", "dev", end)
        _ip("-n", ns, "link", "set", end, "up")
        _ip("-n", ns, "link", "set", "lo", "up")
    return a, b


def listening_addresses(namespace: str, port: int) -> list[str]:
    """The local addresses (hex, as /proc/net/tcp{,6} write them) of the sockets listening on
    `port` in `namespace`."""
    addresses = []
    for table in ("tcp", "tcp6"):
        for line in _ip("netns", "exec", namespace, "cat", f"/proc/net/{table}").splitlines()[1:]:
            local, _, state = line.split()[1:4]
            address, hex_port = local.split(":")
            if state == "0A" and int(hex_port, 16) == port:  # 0A: TCP_LISTEN
                addresses.append(address)
    return addresses


def read(path: str) -> str:
    with open(path) as f:
        return f.read()


def progress(output: str) -> list[tuple[int, float]]:
    """(learner step, mean params step of its last batch) of each console line in `output`."""
    return [(int(step), int(step) - 1 - float(lag)) for step, lag in PROGRESS.findall(output)]


def trained_on_new_experience(output: str) -> bool:
    """Whether the learner, after its first console line in `output` (at step s), trained on a
    batch acted with weights published after step s: experience no earlier actor acted on."""
    lines = progress(output)
    return bool(lines) and any(params_step >= lines[0][0] + 1 for _, params_step in lines[1:])


def stop(process: subprocess.Popen, output_path: str) -> str:
    """Ctrl-C, as a user stops a role; returns its output once it exited cleanly."""
    process.send_signal(signal.SIGINT)
    output = finish(process, output_path, timeout_s=120)
    assert process.returncode == 0, output
    return output


def test_an_actor_host_in_another_network_namespace_is_killed_and_rejoins(namespaces, tmp_path):
    a, b = namespaces
    logdir = str(tmp_path)
    flags = COMMON + FLEET_FLAGS
    module = "dice.main"
    port = 8000  # choice: the namespaces' own port, free
    address = f"--replay_address={ADDRESS_A}:{port}"

    def start(namespace, *extra):
        # Each in a session of its own: the test kills an actor host's whole process group, as a
        # lost host loses all its processes at once.
        return run_main(
            logdir,
            *extra,
            flags=flags,
            module=module,
            prefix=[IP, "netns", "exec", namespace],
            start_new_session=True,
        )

    def start_actor_host():
        return start(b, "--role=actor", address, f"--first_actor={FIRST_ACTOR}")

    def check_running():
        for process, output_path in started:
            assert process.poll() is None, read(output_path)

    behaviour = [
        os.path.join(logdir, "behaviour", f"actor_{i}.npz")
        for i in range(FIRST_ACTOR, FIRST_ACTOR + NUM_ACTORS)
    ]
    started = []
    try:
        replay_role = start(a, "--role=replay", f"--replay_port={port}", "--open_port")
        started.append(replay_role)
        wait_until(
            lambda: check_running() or "[replay] serving on port" in read(replay_role[1]),
            FLEET_STARTUP_S,
            "the replay role to serve",
        )
        # The server listens on every interface of namespace A (the wildcard address), so
        # namespace B reaches it at 10.231.0.1.
        listening = listening_addresses(a, port)
        assert listening and all(set(hex_address) == {"0"} for hex_address in listening)
        learner = start(a, "--role=learner", address)
        host = start_actor_host()
        started += [learner, host]

        def trained_and_saved():
            check_running()
            saved = all(os.path.exists(path) for path in behaviour)
            return checkpoint_step(logdir) >= 2 and episodes(logdir) and saved

        # The actors save their bandits each checkpoint interval (1 s here): the test waits.
        wait_until(trained_and_saved, FLEET_STARTUP_S, "a checkpoint, games (and behaviour state)")
        os.killpg(host[0].pid, signal.SIGKILL)
        first_output = finish(*host, timeout_s=60)
        wait_until(lambda: not process_group(host[0].pid), 60, "the actor host to die")
        killed_step = checkpoint_step(logdir)
        killed_games = len(episodes(logdir))
        killed_counts = [bandit_counts(logdir, i, ENVS) for i in (4, 5)]
        started.remove(host)
        check_running()  # the replay role and the learner live on
        after_kill = len(read(learner[1]))  # the learner's console from here on

        host = start_actor_host()
        started.append(host)

        def rejoined():
            check_running()
            # The killed actors acted only with weights published before the kill; a batch
            # acted with later ones holds the new actors' experience.
            trained = trained_on_new_experience(read(learner[1])[after_kill:])
            # Each new actor has played games and saved its bandits (every 1 s) past the state
            # it started from.
            played = all(
                bandit_counts(logdir, i, ENVS).sum() > killed.sum()
                for i, killed in zip((4, 5), killed_counts)
            )
            return trained and played

        wait_until(
            rejoined, FLEET_STARTUP_S, "the new actors' experience (and saved behaviour state)"
        )

        # Now the learner is lost and resumed, while the actor host plays on: its actors' bandits
        # roll back to the state the resumed checkpoint kept, as a local run's new actors start.
        os.killpg(learner[0].pid, signal.SIGKILL)
        learner_output = finish(*learner, timeout_s=60)
        wait_until(lambda: not process_group(learner[0].pid), 60, "the learner to die")
        started.remove(learner)
        learner = start(a, "--role=learner", address)
        started.append(learner)
        rolled_back = [f"[behaviour] actor_{i}.npz: the run resumed from ckpt-" for i in (4, 5)]

        def rolled_back_and_played():
            check_running()
            if not all(line in read(host[1]) for line in rolled_back):
                return False
            # Saved since: the checkpoint's state (itself past the first host's, which the new
            # actors loaded and played on from) or more.
            return all(
                bandit_counts(logdir, i, ENVS).sum() > killed.sum()
                for i, killed in zip((4, 5), killed_counts)
            )

        wait_until(
            rolled_back_and_played,
            FLEET_STARTUP_S,
            "the actor host's actors to roll back to the resumed checkpoint and play on",
        )
        second_output = stop(*host)
        resumed_output = stop(*learner)
        stop(*replay_role)
    finally:
        for process, _ in started:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(60)

    # Both incarnations of the host are actors 4 and 5: names, seeds and state files.
    for output in (first_output, second_output):
        assert f"[actor] actors 4..5 x {ENVS} envs writing to {ADDRESS_A}:{port}" in output
        for i, path in zip((4, 5), behaviour):
            state = "new" if output is first_output else "restored"
            line = f"[actor] actor_{i}: seed {SEED + i * ENVS}, behaviour state {path} ({state})"
            assert line in output.splitlines(), output
    assert "actor_0" not in first_output + second_output

    # The learner lived through the actor host's loss: it resumed nothing until it was killed,
    # and its step and frames only grew, across its own resume too (the logs were cut back to
    # the checkpoint it resumed).
    assert "resumed" not in learner_output
    assert_the_run_went_on(logdir, killed_step, killed_games, ties=NUM_ACTORS * ENVS)
    resumed = re.search(r"resumed \S+/checkpoints/ckpt-(\d+) ", resumed_output)
    assert resumed, resumed_output
    for i in (4, 5):  # each actor took that checkpoint's bandits, which it had saved there
        line = (
            f"[behaviour] actor_{i}.npz: the run resumed from ckpt-{resumed.group(1)}; its "
            "bandits are that state's (kept)"
        )
        assert line in second_output.splitlines(), second_output

    # The restarted actors loaded their predecessors' bandits and went on from them.
    for i, before in zip((4, 5), killed_counts):
        after = bandit_counts(logdir, i, ENVS)
        assert (after >= before).all() and after.sum() > before.sum(), (i, before, after)
