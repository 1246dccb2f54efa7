"""A TCP proxy in front of a private Redis that forwards bytes and, when armed, spoils one
reply: sends it twice, sends its copy late (just before the next reply), or drops it and
closes the connection after the server ran the command. Paused, it holds every reply: a
replica replicating through it lags behind its primary.

A fault is armed for the next command whose bytes contain ``marker`` (a record's key, a
script's argument): the reply that follows that command on its connection gets it.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from dataclasses import dataclass, field


@dataclass
class _Link:
    client: socket.socket
    upstream: socket.socket
    #: the fault the next reply on this link gets ("" none)
    pending: str = ""
    #: a reply's copy held back for the late duplicate
    held: bytes = b""
    closed: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def close(self) -> None:
        with self.lock:
            if self.closed:
                return
            self.closed = True
        for sock in (self.client, self.upstream):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


class ReplyProxy:
    """``127.0.0.1:<port>`` forwarding to ``upstream_port``; :meth:`arm` one fault."""

    FAULTS = ("duplicate", "late-duplicate", "drop")

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self._lock = threading.Lock()
        self._armed: tuple[str, bytes] | None = None
        self._links: list[_Link] = []
        #: faults applied, in order
        self.applied: list[str] = []
        self._stopped = False
        #: cleared by :meth:`pause`: replies are held (a replica behind it lags)
        self._flowing = threading.Event()
        self._flowing.set()
        threading.Thread(target=self._accept, daemon=True).start()

    def pause(self) -> None:
        """Hold every reply from now on (the server's bytes wait in the proxy)."""
        self._flowing.clear()

    def resume(self) -> None:
        self._flowing.set()

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def arm(self, fault: str, marker: bytes) -> None:
        assert fault in self.FAULTS
        with self._lock:
            self._armed = (fault, marker)

    def close(self) -> None:
        self._stopped = True
        self._flowing.set()
        self.listener.close()
        for link in list(self._links):
            link.close()

    def _accept(self) -> None:
        while not self._stopped:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            link = _Link(client, upstream)
            self._links.append(link)
            threading.Thread(target=self._requests, args=(link,), daemon=True).start()
            threading.Thread(target=self._replies, args=(link,), daemon=True).start()

    def _requests(self, link: _Link) -> None:
        try:
            while True:
                chunk = link.client.recv(65536)
                if not chunk:
                    break
                with self._lock:
                    armed = self._armed
                    if armed is not None and armed[1] in chunk:
                        link.pending, self._armed = armed[0], None
                link.upstream.sendall(chunk)
        except OSError:
            pass
        link.close()

    def _replies(self, link: _Link) -> None:
        try:
            while True:
                chunk = link.upstream.recv(65536)
                if not chunk:
                    break
                self._flowing.wait()
                fault, link.pending = link.pending, ""
                if fault:
                    self.applied.append(fault)
                if fault == "drop":
                    break  # the server ran the command; its reply never arrives
                held, link.held = link.held, b""
                if fault == "duplicate":
                    link.client.sendall(held + chunk + chunk)
                elif fault == "late-duplicate":
                    link.client.sendall(held + chunk)
                    link.held = chunk  # sent again just before the next reply
                else:
                    link.client.sendall(held + chunk)
        except OSError:
            pass
        link.close()
