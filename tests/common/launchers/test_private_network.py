"""A one-machine run's Reverb server is reachable from the run only
(common/launchers/private_network.py): the process moves into a network namespace whose only
interface is loopback, its children follow, and the machine's own network holds no socket of the
run; `--open_port` opens it, on purpose."""

import os
import re
import signal
import subprocess
import sys
import textwrap

import pytest

from common.launchers import private_network
from tests.system_helpers import finish, run_main, wait_until

LISTEN = "0A"  # the TCP_LISTEN state in /proc/net/tcp
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def listening(proc: str = "/proc/self") -> dict[int, list[str]]:
    """{port: [local addresses]} of the listening TCP sockets in the network `proc` is in (its
    `net/tcp` and `net/tcp6`; addresses as the kernel writes them, hex, all zeros for every
    interface)."""
    ports: dict[int, list[str]] = {}
    for name in ("tcp", "tcp6"):
        with open(os.path.join(proc, "net", name)) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                address, port = fields[1].split(":")
                if fields[3] == LISTEN:
                    ports.setdefault(int(port, 16), []).append(address)
    return ports


def network(pid: int | str) -> str:
    """The network namespace a process is in."""
    return os.readlink(f"/proc/{pid}/ns/net")


ENTER_AND_SERVE = """
    import os, socket, sys
    from common.launchers import private_network
    assert private_network.enter(user_namespace={user_namespace}) is None
    assert private_network.entered() and private_network.enter() is None  # once only
    server = socket.socket(socket.AF_INET6)
    server.bind(("::", 0))  # every interface, as Reverb's server binds
    server.listen()
    port = server.getsockname()[1]
    socket.create_connection(("localhost", port), timeout=5).close()
    print(port, ",".join(private_network.interfaces()), os.geteuid(), flush=True)
    sys.stdin.readline()  # holds the socket while the test looks from outside
"""


@pytest.mark.parametrize("user_namespace", [False, True])
def test_a_process_that_enters_sees_loopback_alone_and_serves_nobody_outside(user_namespace):
    # With a user namespace, as an unprivileged user enters; without, as root may.
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(ENTER_AND_SERVE.format(user_namespace=user_namespace)),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        port, interfaces, uid = child.stdout.readline().split()
        assert interfaces == "lo" and int(uid) == os.geteuid()  # the same user inside as out
        # The child listens in its own network, and nothing listens on its port in this one.
        assert int(port) in listening(f"/proc/{child.pid}")
        assert int(port) not in listening()
        assert network(child.pid) != network("self")
    finally:
        child.communicate("\n", timeout=30)
    assert child.returncode == 0
    assert not private_network.entered()  # the test's own process stayed where it was


FLAGS = [
    "--env=CartPole",
    "--num_actors=1",
    "--envs_per_actor=4",
    "--eval_interval_s=1000",  # an evaluator process too, for the final evaluation
    "--total_frames=100000000",
    "--log_interval_s=1",
]


def serving(output_path: str) -> re.Match | None:
    with open(output_path) as f:
        return re.search(r"\[launch\] Reverb server on port (\d+)(.*)", f.read())


def children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(c) for c in f.read().split()]


@pytest.mark.slow
@pytest.mark.parametrize("open_port", [False, True])
def test_a_local_run_listens_only_in_a_network_of_its_own_unless_asked(tmp_path, open_port):
    process, output_path = run_main(
        str(tmp_path), *(["--open_port"] if open_port else []), flags=FLAGS
    )
    try:
        wait_until(lambda: serving(output_path), 120, "the Reverb server's line")
        wait_until(lambda: len(children(process.pid)) >= 2, 120, "the actor and the evaluator")
        found = serving(output_path)
        port = int(found.group(1))
        run = [process.pid, *children(process.pid)]
        if open_port:
            assert found.group(2).startswith(" of every network interface, without authentication")
            # The machine's network holds the server's socket, on every interface (all zeros).
            assert set(listening()[port]) <= {"00000000", "0" * 32}
            assert all(network(pid) == network("self") for pid in run)
        else:
            assert found.group(2).startswith(", reachable from this run only")
            assert port in listening(f"/proc/{process.pid}")  # the reading sees the server...
            # ...which no interface of this machine's network offers: none of the run's sockets
            # is here, and the run's processes share a network whose only interface is loopback.
            assert not set(listening(f"/proc/{process.pid}")) & set(listening())
            assert all(network(pid) == network(process.pid) != network("self") for pid in run)
            with open(f"/proc/{process.pid}/net/dev") as f:
                assert [line.split(":")[0].strip() for line in f.readlines()[2:]] == ["lo"]
    finally:
        process.send_signal(signal.SIGINT)
        output = finish(process, output_path, timeout_s=120)
    assert process.returncode == 0, output
