"""Private servers for the multi-node tests: a Redis Cluster and a PgBouncer, on loopback.

Every server binds ports chosen at run time (the kernel's free ports), lives in a
temporary directory, and is stopped by whoever started it. Nothing here touches the
shared PostgreSQL or Redis beyond the databases named by the caller.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class ServerError(RuntimeError):
    """A server could not be started."""


class PortTaken(ServerError):
    """Another process listens on a port chosen for this server."""


def free_ports(count: int) -> list[int]:
    """``count`` distinct loopback ports that were free a moment ago (held open together)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [int(s.getsockname()[1]) for s in sockets]
    finally:
        for sock in sockets:
            sock.close()


def wait_for_port(port: int, deadline: float) -> None:
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)  # real time: waiting for a real server
    raise ServerError(f"nothing listens on 127.0.0.1:{port}")


def _stop(process: subprocess.Popen[bytes] | None) -> None:
    if process is None or process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(5)


# -- Redis Cluster -----------------------------------------------------------------------


@dataclass
class ClusterNode:
    port: int
    bus_port: int
    directory: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        command = [
            "redis-server",
            "--bind", "127.0.0.1",
            "--port", str(self.port),
            "--cluster-enabled", "yes",
            "--cluster-port", str(self.bus_port),
            "--cluster-config-file", str(self.directory / "nodes.conf"),
            "--cluster-node-timeout", "1000",
            "--cluster-replica-validity-factor", "0",  # a replica may always take over
            # while a primary fails over, the others keep serving their own slots (with
            # full coverage required, every node answers CLUSTERDOWN until the promotion)
            "--cluster-require-full-coverage", "no",
            "--repl-diskless-sync-delay", "0",
            "--dir", str(self.directory),
            "--save", "", "--appendonly", "no",
            "--protected-mode", "no",
            "--logfile", str(self.directory / "redis.log"),
        ]  # fmt: skip
        self.process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )

    def wait_ready(self, deadline: float) -> None:
        """Wait until this node's own process answers on its port. It exits when it cannot
        bind its ports, and another process's server may answer there instead: both raise
        :class:`PortTaken`."""
        assert self.process is not None
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise PortTaken(f"redis-server on {self.address} exited (a port was taken?)")
            try:
                served_by = int(self.client().info("server")["process_id"])
            except Exception:  # noqa: BLE001 - not listening yet
                time.sleep(0.05)  # real time: waiting for a real server
                continue
            if served_by != self.process.pid:
                raise PortTaken(f"{self.address} is served by pid {served_by}, not this node's")
            return
        raise ServerError(f"nothing listens on {self.address}")

    def kill(self) -> None:
        """SIGKILL: the node dies as a crashed machine would, without a goodbye."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(5)

    def stop(self) -> None:
        _stop(self.process)

    def client(self) -> Any:
        import redis

        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5)


@dataclass
class RedisClusterServer:
    """``primaries`` primaries with ``replicas`` replicas each, made by ``redis-cli --cluster``."""

    primaries: int = 3
    replicas: int = 1
    directory: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="redis-cluster-")))
    nodes: list[ClusterNode] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"redis://{self.nodes[0].address}/0"

    @staticmethod
    def available() -> bool:
        return bool(shutil.which("redis-server") and shutil.which("redis-cli"))

    def start(self, timeout: float = 60, attempts: int = 3) -> RedisClusterServer:
        """Start the nodes on free ports and make them a cluster. Ports are free when chosen,
        not when bound: another process (a second cluster starting at the same time) may
        take one in between, so the nodes are first checked to be this cluster's own
        processes, and on fresh ports again if one is not."""
        for attempt in range(1, attempts + 1):
            try:
                return self._start(timeout)
            except PortTaken:
                if attempt == attempts:
                    raise
        raise AssertionError("unreachable")

    def _start(self, timeout: float) -> RedisClusterServer:
        count = self.primaries * (1 + self.replicas)
        ports = free_ports(2 * count)
        self.nodes = [
            ClusterNode(ports[2 * i], ports[2 * i + 1], self.directory / f"node-{i}")
            for i in range(count)
        ]
        try:
            for node in self.nodes:
                node.start()
            deadline = time.monotonic() + timeout
            for node in self.nodes:
                node.wait_ready(deadline)
            created = subprocess.run(
                [
                    "redis-cli",
                    "--cluster",
                    "create",
                    *(node.address for node in self.nodes),
                    "--cluster-replicas",
                    str(self.replicas),
                    "--cluster-yes",
                ],  # fmt: skip
                capture_output=True,
                timeout=timeout,
                check=False,
            )
            if created.returncode:
                raise ServerError(f"redis-cli --cluster create failed: {created.stdout!r}")
            self.wait_until_healthy(deadline, replicated=True)
        except BaseException:
            self.stop()
            raise
        return self

    def wait_until_healthy(self, deadline: float, *, replicated: bool = False) -> None:
        """Every live node sees the cluster ``ok`` and every slot served by a live primary;
        ``replicated``: every primary also streams to its replicas (their sync is done)."""
        while time.monotonic() < deadline:
            if all(self._node_ok(node) for node in self.live_nodes()) and (
                not replicated or all(self._replicas_online(n) for n in self.live_nodes())
            ):
                return
            time.sleep(0.1)  # real time: waiting for the cluster to agree on its state
        raise ServerError("the Redis Cluster did not become healthy")

    def _node_ok(self, node: ClusterNode) -> bool:
        try:
            info = node.client().execute_command("CLUSTER", "INFO")
        except Exception:  # noqa: BLE001 - a node still starting
            return False
        text = info.decode() if isinstance(info, bytes) else str(info)
        fields = dict(
            line.split(":", 1) for line in text.splitlines() if ":" in line and line.strip()
        )
        return (
            fields.get("cluster_state") == "ok"
            and fields.get("cluster_slots_ok") == "16384"
            and int(fields.get("cluster_known_nodes", 0)) >= len(self.nodes)
        )

    def _replicas_online(self, node: ClusterNode) -> bool:
        try:
            info = node.client().info("replication")
        except Exception:  # noqa: BLE001 - a node still starting
            return False
        if info.get("role") != "master":
            return True
        online = [v for k, v in info.items() if k.startswith("slave") and isinstance(v, dict)]
        return len([v for v in online if v.get("state") == "online"]) >= self.replicas

    def live_nodes(self) -> list[ClusterNode]:
        return [n for n in self.nodes if n.process is not None and n.process.poll() is None]

    def primary_of(self, key: str) -> ClusterNode:
        """The node currently serving ``key``'s slot as primary."""
        for node in self.live_nodes():
            with contextlib.suppress(Exception):
                slot = int(node.client().execute_command("CLUSTER", "KEYSLOT", key))
                for start, end, primary, *_replicas in node.client().execute_command(
                    "CLUSTER", "SLOTS"
                ):
                    if start <= slot <= end:
                        port = int(primary[1])
                        return next(n for n in self.nodes if n.port == port)
        raise ServerError(f"no live node knows the primary of {key!r}")

    def serving_primaries(self) -> list[ClusterNode]:
        """The live nodes currently serving slots."""
        for node in self.live_nodes():
            with contextlib.suppress(Exception):
                ports = {
                    int(p[1])
                    for _s, _e, p, *_r in node.client().execute_command("CLUSTER", "SLOTS")
                }
                return [n for n in self.nodes if n.port in ports]
        raise ServerError("no live node answers CLUSTER SLOTS")

    def flush(self) -> None:
        """Empty every primary (this private cluster only)."""
        for node in self.live_nodes():
            with contextlib.suppress(Exception):
                node.client().flushall()

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()
        shutil.rmtree(self.directory, ignore_errors=True)


# -- PgBouncer ---------------------------------------------------------------------------


@dataclass
class PgBouncerServer:
    """PgBouncer in ``pool_mode`` in front of a PostgreSQL server (trust auth, loopback)."""

    pg_host: str = "127.0.0.1"
    pg_port: int = 5432
    pg_user: str = "postgres"
    pool_mode: str = "transaction"
    pool_size: int = 20
    directory: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="pgbouncer-")))
    port: int = 0
    process: subprocess.Popen[bytes] | None = None

    @staticmethod
    def binary() -> str | None:
        return shutil.which("pgbouncer") or (
            "/usr/sbin/pgbouncer" if Path("/usr/sbin/pgbouncer").exists() else None
        )

    @classmethod
    def available(cls) -> bool:
        return cls.binary() is not None

    def url(self, database: str) -> str:
        return f"postgres://{self.pg_user}@127.0.0.1:{self.port}/{database}"

    def start(self, timeout: float = 30) -> PgBouncerServer:
        binary = self.binary()
        if binary is None:
            raise ServerError("pgbouncer is not installed (apt-get install pgbouncer)")
        self.port = free_ports(1)[0]
        users = self.directory / "users.txt"
        users.write_text(f'"{self.pg_user}" ""\n')
        ini = self.directory / "pgbouncer.ini"
        ini.write_text(
            "[databases]\n"
            f"* = host={self.pg_host} port={self.pg_port}\n"
            "[pgbouncer]\n"
            "listen_addr = 127.0.0.1\n"
            f"listen_port = {self.port}\n"
            "unix_socket_dir =\n"
            "auth_type = trust\n"
            f"auth_file = {users}\n"
            f"admin_users = {self.pg_user}\n"
            f"pool_mode = {self.pool_mode}\n"
            f"default_pool_size = {self.pool_size}\n"
            "max_client_conn = 500\n"
            "server_reset_query =\n"
            "ignore_startup_parameters = extra_float_digits,options\n"
            f"logfile = {self.directory / 'pgbouncer.log'}\n"
            f"pidfile = {self.directory / 'pgbouncer.pid'}\n"
        )
        command = [binary, str(ini)]
        if os.geteuid() == 0:  # pgbouncer refuses to run as root
            os.chmod(self.directory, 0o777)  # noqa: S103 - a private temp dir, removed at stop
            for path in (users, ini):
                os.chmod(path, 0o644)
            command = [binary, "-u", "nobody", str(ini)]
        self.process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        try:
            wait_for_port(self.port, time.monotonic() + timeout)
        except ServerError:
            log = self.directory / "pgbouncer.log"
            detail = log.read_text() if log.exists() else ""
            self.stop()
            raise ServerError(f"pgbouncer did not start: {detail[-2000:]}") from None
        return self

    def stop(self) -> None:
        _stop(self.process)
        shutil.rmtree(self.directory, ignore_errors=True)
