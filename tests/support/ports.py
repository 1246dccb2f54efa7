"""A free TCP port on the loopback interface, for a server a test starts."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port no one listens on now (the kernel's pick; a server binds it next)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
