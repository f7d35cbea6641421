"""A one-machine run's network of its own: loopback only, so its Reverb server is nobody else's.

dm-reverb 0.14's server takes a port and listens on every interface (`[::]:<port>`), with no
authentication: anyone who can reach the machine could sample the run's experience, read the
weights it publishes, or write into its replay. The local launcher (`--role=local`, the default)
therefore moves its process, before it starts anything, into a network namespace of its own
(`unshare(2)` with CLONE_NEWNET; with CLONE_NEWUSER too when it is not root, as an unprivileged
user may where the kernel allows user namespaces) and brings that namespace's loopback up. Every
process of the run (learner, Reverb server, actors, evaluator) is its child and inherits it: they
reach each other on `localhost`, and the server's port exists in no network another process can
reach. The run's files are the same files; only its sockets are private.

Where the kernel refuses (no user namespaces for this user, a seccomp profile), `enter` returns the
reason, and the launcher says on one line that the port is open (`common.launchers.launch`).
`--open_port` skips all this, for a local run that actor hosts join
(docs/guides/several_machines.md).
"""

import ctypes
import errno
import fcntl
import os
import socket
import struct

CLONE_NEWUSER = 0x10000000  # <linux/sched.h>
CLONE_NEWNET = 0x40000000
SIOCGIFFLAGS, SIOCSIFFLAGS = 0x8913, 0x8914  # <linux/sockios.h>
IFF_UP = 0x1  # <net/if.h>

_entered = False


def entered() -> bool:
    """Whether this process moved into a network of its own (`enter`)."""
    return _entered


def enter(user_namespace: bool | None = None) -> str | None:
    """Moves this process, and every child it starts from now on, into a new network namespace
    whose only interface is loopback, up. Returns None when done, else why it could not (the
    process then stays where it was). Call it before any thread or child starts: a user
    namespace takes only a single-threaded process. `user_namespace`: create one too (default:
    when not root, as an unprivileged user must)."""
    global _entered
    if _entered:
        return None
    if not os.path.exists("/proc/self/ns/net"):
        return "this system has no network namespaces"
    libc = ctypes.CDLL(None, use_errno=True)
    uid, gid = os.geteuid(), os.getegid()
    if user_namespace is None:
        user_namespace = uid != 0
    flags, names = (
        (CLONE_NEWUSER | CLONE_NEWNET, "CLONE_NEWUSER | CLONE_NEWNET")
        if user_namespace
        else (CLONE_NEWNET, "CLONE_NEWNET")
    )
    if libc.unshare(flags) != 0:
        code = ctypes.get_errno()
        reason = f"unshare({names}): {os.strerror(code)}"
        if code == errno.EINVAL and user_namespace:
            reason += " (a user namespace takes a single-threaded process)"
        elif code in (errno.EPERM, errno.ENOSPC):
            reason += " (namespaces are not allowed to this user here)"
        return reason
    if user_namespace:
        # The same ids inside as outside: files the run writes keep their owner.
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
    _loopback_up()
    _entered = True
    return None


def interfaces() -> list[str]:
    """The network interfaces this process sees (`/proc/self/net/dev`)."""
    with open("/proc/self/net/dev") as f:
        return [line.split(":")[0].strip() for line in f.readlines()[2:]]


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def _loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sh", b"lo", 0)
        flags = struct.unpack("16sh", fcntl.ioctl(sock, SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, SIOCSIFFLAGS, struct.pack("16sh", b"lo", flags | IFF_UP))
