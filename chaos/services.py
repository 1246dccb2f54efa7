"""Private servers for fault injection: a Redis, a PostgreSQL cluster and a MariaDB server
of our own.

Each runs from a temporary directory on a free loopback port, so stopping, freezing
(SIGSTOP), killing or restarting it never touches the shared services. Every wait is
bounded, and :meth:`close` always leaves no process behind.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path


class ServiceError(RuntimeError):
    """A private server did not start or stop in time."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _kill(process: subprocess.Popen[bytes] | None, sig: int = signal.SIGKILL) -> None:
    if process is None or process.poll() is not None:
        return
    try:
        process.send_signal(sig)
        process.wait(timeout=10)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        process.kill()
        process.wait(timeout=5)


def redis_server_binary() -> str | None:
    return shutil.which("redis-server")


class PrivateRedis:
    """``redis-server`` on a free port and a private directory.

    ``aof``: append-only file with ``appendfsync always`` (every write on disk before the
    reply), so a SIGKILL loses nothing. Without it nothing is persisted: a restart starts
    empty, as a cache-only Redis does.
    """

    def __init__(self, *, aof: bool = False, extra: tuple[str, ...] = ()) -> None:
        binary = redis_server_binary()
        if binary is None:
            raise ServiceError("redis-server is not installed")
        self.binary = binary
        self.aof = aof
        self.extra = extra
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="idem-chaos-redis-"))
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 15.0) -> None:
        persistence = ["--appendonly", "yes", "--appendfsync", "always"] if self.aof else []
        if not self.aof:
            persistence = ["--appendonly", "no"]
        command = [
            self.binary, "--port", str(self.port), "--bind", "127.0.0.1",
            "--dir", str(self.dir), "--save", "", *persistence,
            "--logfile", str(self.dir / "redis.log"), *self.extra,
        ]  # fmt: skip
        self.process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ServiceError(f"redis-server exited: {self.log_tail()}")
            if self.ping():
                return
            time.sleep(0.05)
        raise ServiceError(f"redis-server not ready on {self.port}: {self.log_tail()}")

    def ping(self) -> bool:
        import redis

        try:
            return bool(redis.Redis(port=self.port, socket_timeout=0.5).ping())
        except redis.RedisError:
            return False

    def client(self) -> object:
        import redis

        return redis.Redis(port=self.port, socket_timeout=2)

    def freeze(self) -> None:
        """SIGSTOP: the server keeps its socket but answers nothing."""
        if self.process is not None:
            self.process.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL (after SIGCONT, so a frozen server dies at once)."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
        _kill(self.process)
        self.process = None

    def stop(self) -> None:
        """A clean shutdown (SIGTERM)."""
        _kill(self.process, signal.SIGTERM)
        self.process = None

    def restart(self) -> None:
        self.kill()
        self.start()

    def reset(self, *, aof: bool) -> None:
        """Kill, forget everything on disk, and start again with ``aof`` persistence."""
        self.kill()
        for entry in self.dir.iterdir():
            if entry.is_dir():
                shutil.rmtree(entry)
            elif entry.name != "redis.log":
                entry.unlink()
        self.aof = aof
        self.start()

    def log_tail(self, lines: int = 10) -> str:
        log = self.dir / "redis.log"
        if not log.exists():
            return ""
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])

    def close(self) -> None:
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> PrivateRedis:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def postgres_bin_dir() -> Path | None:
    """The directory of ``initdb`` and ``pg_ctl`` (Debian keeps them off the PATH)."""
    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if Path(candidate, "initdb").exists():
            return Path(candidate)
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


class PrivatePostgres:
    """A throwaway PostgreSQL cluster (``initdb``) on a free port, trust auth, fsync off
    (durable against a crash of the server process, not of the machine)."""

    def __init__(self) -> None:
        bin_dir = postgres_bin_dir()
        if bin_dir is None:
            raise ServiceError("PostgreSQL server binaries (initdb, pg_ctl) are not installed")
        self.bin = bin_dir
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="idem-chaos-pg-"))
        self.data = self.root / "data"
        self.user = "postgres"
        self._env = dict(os.environ)
        if os.geteuid() == 0:
            # initdb refuses to run as root: run the cluster as an unprivileged user
            self._run_as = "postgres"
            shutil.chown(self.root, user="postgres")
        else:
            self._run_as = ""

    def _cmd(self, *args: str) -> list[str]:
        if self._run_as:
            return ["runuser", "-u", self._run_as, "--", *args]
        return list(args)

    def url(self, name: str = "postgres") -> str:
        return f"postgres://{self.user}@127.0.0.1:{self.port}/{name}"

    def init(self) -> None:
        subprocess.run(
            self._cmd(
                str(self.bin / "initdb"), "-D", str(self.data), "-U", self.user,
                "--auth", "trust", "--no-sync", "-E", "UTF8",
            ),
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120,
        )  # fmt: skip

    def start(self, timeout: float = 30.0) -> None:
        options = (
            # fsync off only spares the disk: a crash of the server process (our restart)
            # loses nothing the OS already has. synchronous_commit stays on, or a crash
            # would lose commits whose 2xx the clients already got
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c full_page_writes=off -c max_connections=200"
        )
        subprocess.run(
            self._cmd(
                str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.root / "pg.log"),
                "-o", options, "-w", "-t", str(int(timeout)), "start",
            ),
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=timeout + 10,
        )  # fmt: skip

    def stop(self, mode: str = "fast") -> None:
        if not (self.data / "postmaster.pid").exists():
            return
        subprocess.run(
            self._cmd(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop"),
            check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60,
        )  # fmt: skip

    def restart(self) -> None:
        self.stop("immediate")  # a crash: no shutdown checkpoint, recovery on start
        self.start()

    def psql(self, sql: str, database: str = "postgres") -> str:
        import psycopg

        with psycopg.connect(self.url(database), autocommit=True, connect_timeout=5) as conn:
            cursor = conn.execute(sql)
            if cursor.description is None:
                return ""
            return "\n".join("|".join(str(v) for v in row) for row in cursor.fetchall())

    def create_database(self, name: str) -> str:
        self.psql(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def terminate_backends(self, database: str) -> int:
        """``pg_terminate_backend`` on every session of ``database`` but our own."""
        out = self.psql(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            f"WHERE datname = '{database}' AND pid <> pg_backend_pid()"
        )
        return int(out or 0)

    def close(self) -> None:
        try:
            self.stop("immediate")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> PrivatePostgres:
        self.init()
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def mariadb_binaries() -> tuple[str, str] | None:
    """``mariadbd`` and ``mariadb-install-db`` (or MySQL-named ones), if installed."""
    server = shutil.which("mariadbd") or shutil.which("mariadbd", path="/usr/sbin:/usr/bin")
    install = shutil.which("mariadb-install-db") or shutil.which("mysql_install_db")
    return (server, install) if server and install else None


class PrivateMariaDB:
    """``mariadbd`` on a free port with its own datadir (``mariadb-install-db``), ``root``
    with an empty password over TCP, utf8mb4, no binary log. :meth:`stop` is a clean
    shutdown (SIGTERM), :meth:`kill` a crash (SIGKILL, recovery on the next start)."""

    def __init__(self) -> None:
        binaries = mariadb_binaries()
        if binaries is None:
            raise ServiceError("MariaDB server binaries (mariadbd, mariadb-install-db) missing")
        self.server, self.install = binaries
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="idem-chaos-mariadb-"))
        self.data = self.root / "data"
        self.process: subprocess.Popen[bytes] | None = None
        # mariadbd refuses to run as root unless told: run it as the mysql user when root
        self._user = "mysql" if os.geteuid() == 0 else ""
        if self._user:
            shutil.chown(self.root, user=self._user)

    def url(self, name: str) -> str:
        return f"mysql://root@127.0.0.1:{self.port}/{name}"

    def _user_args(self) -> list[str]:
        return [f"--user={self._user}"] if self._user else []

    def init(self) -> None:
        subprocess.run(
            [
                self.install, "--no-defaults", f"--datadir={self.data}", *self._user_args(),
                "--auth-root-authentication-method=normal", "--skip-test-db",
                "--skip-name-resolve",
            ],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120,
        )  # fmt: skip

    def start(self, timeout: float = 30.0) -> None:
        self.process = subprocess.Popen(
            [
                self.server, "--no-defaults", f"--datadir={self.data}", *self._user_args(),
                f"--port={self.port}", "--bind-address=127.0.0.1",
                f"--socket={self.root / 'mysqld.sock'}", f"--pid-file={self.root / 'mysqld.pid'}",
                f"--log-error={self.root / 'error.log'}", "--skip-log-bin", "--skip-name-resolve",
                "--innodb-buffer-pool-size=32M", "--character-set-server=utf8mb4",
                "--collation-server=utf8mb4_unicode_ci", "--max-connections=200",
            ],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ServiceError(f"mariadbd exited: see {self.root / 'error.log'}")
            if _port_open(self.port):
                try:
                    self.sql("SELECT 1")
                    return
                except Exception:  # noqa: BLE001 - still starting: the port opens first
                    pass
            time.sleep(0.2)
        _kill(self.process)
        raise ServiceError(f"mariadbd did not answer on port {self.port} in {timeout:g} s")

    def stop(self) -> None:
        """A clean shutdown, as an administrator's (or a failover's) stop."""
        _kill(self.process, signal.SIGTERM)

    def kill(self) -> None:
        _kill(self.process)

    def restart(self) -> None:
        self.stop()
        self.start()

    def sql(self, statement: str) -> list[tuple[object, ...]]:
        import MySQLdb  # type: ignore[import-untyped]  # no stubs (types-mysqlclient)

        conn = MySQLdb.connect(
            host="127.0.0.1", port=self.port, user="root", passwd="", connect_timeout=3
        )
        try:
            cursor = conn.cursor()
            cursor.execute(statement)
            rows = list(cursor.fetchall())
            conn.commit()
            return rows
        finally:
            conn.close()

    def create_database(self, name: str) -> str:
        self.sql(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
        return self.url(name)

    def close(self) -> None:
        try:
            self.kill()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> PrivateMariaDB:
        self.init()
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
