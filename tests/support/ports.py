"""Loopback ports: a free one for a server a test starts, and the connections made to one."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port no one listens on now (the kernel's pick; a server binds it next)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def connections_to(port: int) -> int:
    """The established TCP connections whose far end is ``port`` on this machine, read from
    the kernel (``/proc/net/tcp``): what a client opened, even to a server that is frozen."""
    with open("/proc/net/tcp") as table:
        rows = [line.split() for line in table.readlines()[1:]]
    # columns: sl, local address, remote address (hex ip:port), state (01: ESTABLISHED)
    return sum(1 for row in rows if int(row[2].rsplit(":", 1)[1], 16) == port and row[3] == "01")
