"""A pytest plugin that writes down every network connection a test run opens.

``python -m pytest -p tests.support.connection_watch ...`` with
``IDEMPOTENCY_TEST_CONNECTIONS`` naming a file: every ``socket.connect`` of the run (the
interpreter's own audit event, raised by every client library's connect, whichever
library it is) appends one line, ``host port`` or a Unix socket's path, to that file.
``tests/test_quick_tier.py`` runs part of the quick tier so, with no service configured,
and fails on any connection to a service it was not told about.
"""

from __future__ import annotations

import os
import socket
import sys
from typing import Any

LOG = os.environ.get("IDEMPOTENCY_TEST_CONNECTIONS", "")


def describe(address: Any) -> str:
    """``host port`` of an IP address, the path of a Unix socket, else its repr."""
    if isinstance(address, tuple) and len(address) >= 2:
        return f"{address[0]} {address[1]}"
    if isinstance(address, str | bytes):
        return os.fsdecode(address)
    return repr(address)


def _watch(event: str, args: tuple[Any, ...]) -> None:
    if event != "socket.connect":
        return
    sock, address = args
    if isinstance(sock, socket.socket) and sock.family == getattr(socket, "AF_UNIX", None):
        line = f"unix {describe(address)}"
    else:
        line = describe(address)
    with open(LOG, "a", encoding="utf-8") as log:
        log.write(line + "\n")


if LOG:  # imported as a plugin before the test modules: their imports are watched too
    sys.addaudithook(_watch)
