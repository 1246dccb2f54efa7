"""What RedisStore loses of the acknowledged records with AOF on, under ``appendfsync
everysec`` and under ``appendfsync always``.

    python -m chaos.aof_window [--runs 5] [--seconds 3] [--writers 8] [--out FILE]

Each run starts a private ``redis-server`` (AOF on, no RDB, the policy under test) under
``strace``, which notes only its ``fsync``/``fdatasync`` calls (filtered in the kernel:
``--seccomp-bpf``). Writer threads put load on it through :class:`RedisStore`: each claims
a new key and completes it, again and again, and notes the time of every acknowledged
claim and completion. Mid-load the server is SIGKILLed, then started again on its AOF,
and the run counts:

- **lost on a process crash**: the claims and completions acknowledged before the kill
  that the restarted server does not hold;
- **at risk on a machine crash**: those acknowledged after the start of the last fsync that
  had ended by the kill. The kernel held them in its page cache only: a kernel panic or a
  power loss at that instant loses them (a SIGKILL does not). Counted conservatively: an
  fsync covers a record only when it began after the record's reply;
- **the window**: how long an acknowledged record waits for the fsync that covers it (the
  largest and the median over the run, in ms), and the kill's own (kill - that last fsync).

A process crash loses nothing in both modes when Redis writes each command to the AOF
before it replies (it does, unless ``everysec``'s fsync falls 2 s behind and Redis
postpones the write); the machine-crash window is what ``everysec`` leaves open.
Prints a Markdown table and, with ``--out``, writes it there too.
"""

from __future__ import annotations

import argparse
import bisect
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos.services import free_port, redis_server_binary

#: strace's line of a ``write``, ``fsync`` or ``fdatasync`` (``-tt -T -s 0``): whole
#: (``PID HH:MM:SS.ffffff fdatasync(8) = 0 <0.000123>``), begun (``... fdatasync(8
#: <unfinished ...>``) or ended on another line (``... <... fdatasync resumed>) = 0 <...>``).
TRACE_LINE = re.compile(
    r"^(?P<pid>\d+)\s+(?P<h>\d+):(?P<m>\d+):(?P<s>\d+\.\d+)\s+"
    r"(?:<\.\.\. (?P<resumed>\w+) resumed>.*?|(?P<call>\w+)\((?P<fd>\d+).*?)"
    r"(?:= (?P<ret>-?\d+).*<(?P<took>\d+\.\d+)>|(?P<unfinished><unfinished \.\.\.>))\s*$"
)


@dataclass
class Run:
    fsync: str
    #: claims and completions acknowledged before the kill
    acknowledged: tuple[int, int] = (0, 0)
    #: of those, the ones the restarted server does not hold
    lost: tuple[int, int] = (0, 0)
    #: acknowledged replies not yet covered by an fsync at the kill
    at_risk: int = 0
    kill_window_ms: float = 0.0
    waits_ms: list[float] = field(default_factory=list)
    fsyncs: int = 0


class Server:
    """A private redis-server under strace, on a free port in a directory of its own."""

    def __init__(self, fsync: str, directory: Path) -> None:
        self.fsync = fsync
        self.dir = directory
        self.port = free_port()
        self.trace = directory / "fsync.trace"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, *, traced: bool) -> None:
        binary = redis_server_binary()
        if binary is None:
            raise SystemExit("redis-server is not installed")
        command = [
            binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.dir),
            "--save", "", "--appendonly", "yes", "--appendfsync", self.fsync,
            "--logfile", str(self.dir / "redis.log"),
        ]  # fmt: skip
        if traced:
            command = [
                "strace", "-f", "--seccomp-bpf", "-tt", "-T", "-s", "0",
                "-e", "trace=write,fsync,fdatasync",
                "-o", str(self.trace), *command,
            ]  # fmt: skip
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
        client = self.client()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if client.ping():
                    return
            except Exception:  # noqa: BLE001 - loading its AOF, or not listening yet
                time.sleep(0.05)
        raise SystemExit(f"redis-server did not answer on {self.port}")

    def client(self) -> Any:
        import redis

        return redis.Redis(port=self.port, socket_timeout=5)

    def pid(self) -> int:
        return int(self.client().info("server")["process_id"])

    def kill(self, pid: int) -> float:
        """SIGKILL the server (not strace); when it was sent, on the wall clock."""
        at = time.time()
        os.kill(pid, signal.SIGKILL)
        assert self.process is not None
        self.process.wait(timeout=30)  # strace ends with its tracee
        return at

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.kill(self.pid(), signal.SIGKILL)
            self.process.wait(timeout=30)

    def calls(self) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
        """The AOF's writes and fsyncs that returned, each (start, end) on the wall clock:
        the AOF is the file the last fsync synced."""
        midnight = time.mktime(time.localtime()[:3] + (0, 0, 0, 0, 0, -1))
        begun: dict[str, tuple[str, int, float]] = {}
        calls: list[tuple[str, int, float, float]] = []
        for line in self.trace.read_text().splitlines():
            match = TRACE_LINE.match(line)
            if match is None:
                continue
            at = midnight + int(match["h"]) * 3600 + int(match["m"]) * 60 + float(match["s"])
            if match["unfinished"]:
                begun[match["pid"]] = (match["call"], int(match["fd"]), at)
            elif match["resumed"]:
                if match["pid"] in begun and match["ret"] and int(match["ret"]) >= 0:
                    call, fd, start = begun.pop(match["pid"])
                    calls.append((call, fd, start, at))
            elif match["ret"] and int(match["ret"]) >= 0:
                calls.append((match["call"], int(match["fd"]), at, at + float(match["took"])))
        syncs = [call for call in calls if call[0] in ("fsync", "fdatasync")]
        if not syncs:
            return [], []
        aof = max(syncs, key=lambda call: call[2])[1]
        writes = sorted((s, e) for call, fd, s, e in calls if call == "write" and fd == aof)
        fsyncs = sorted((s, e) for call, fd, s, e in syncs if fd == aof)
        return writes, fsyncs


def one_run(fsync: str, seconds: float, writers: int) -> Run:
    from idempotency.stores.base import ClaimStatus, StoredResponse
    from idempotency.stores.redis import RedisStore

    run = Run(fsync)
    with tempfile.TemporaryDirectory(prefix="idem-aof-window-") as directory:
        server = Server(fsync, Path(directory))
        server.start(traced=True)
        pid = server.pid()
        store = RedisStore(
            f"redis://127.0.0.1:{server.port}/0",
            retries=0,
            reconnect_window=0,
            socket_timeout=2,
            max_connections=writers,
        )
        response = StoredResponse(201, [("Content-Type", "application/json")], b'{"ok": true}')
        claims: list[tuple[str, float]] = []
        completions: list[tuple[str, float]] = []
        lock = threading.Lock()
        stop = threading.Event()
        prefix = uuid.uuid4().hex[:8]

        def writer(n: int) -> None:
            i = 0
            while not stop.is_set():
                key = f"{prefix}-{n}-{i}"
                i += 1
                try:
                    claim = store.claim("aof", key, fingerprint="fp", lease=60, ttl=3600)
                    acknowledged = time.time()
                    assert claim.status is ClaimStatus.CLAIMED
                    with lock:
                        claims.append((key, acknowledged))
                    if store.complete("aof", key, fence=claim.fence, response=response, ttl=3600):
                        acknowledged = time.time()
                        with lock:
                            completions.append((key, acknowledged))
                except Exception:  # noqa: BLE001 - the server was killed: this writer is done
                    return

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(writers)]
        for thread in threads:
            thread.start()
        time.sleep(seconds)
        killed_at = server.kill(pid)
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
        writes, syncs = server.calls()
        server.start(traced=False)  # loads its AOF
        try:
            client = server.client()
            claimed = [k for k, at in claims if at <= killed_at]
            completed = [k for k, at in completions if at <= killed_at]
            states = _states(client, store, claimed)
            run.acknowledged = (len(claimed), len(completed))
            run.lost = (
                sum(states[k] is None for k in claimed),
                sum(states[k] != b"c" for k in completed),
            )
        finally:
            server.stop()
    acknowledged = sorted(at for _, at in [*claims, *completions] if at <= killed_at)
    durable = _durable(acknowledged, writes, [sync for sync in syncs if sync[1] <= killed_at])
    run.fsyncs = sum(end <= killed_at for _, end in syncs)
    at_risk = [at for at, safe in zip(acknowledged, durable, strict=True) if safe is None]
    run.at_risk = len(at_risk)
    run.kill_window_ms = (killed_at - at_risk[0]) * 1000 if at_risk else 0.0
    run.waits_ms = [
        max(0.0, safe - at) * 1000
        for at, safe in zip(acknowledged, durable, strict=True)
        if safe is not None
    ]
    return run


def _durable(
    acknowledged: list[float], writes: list[tuple[float, float]], syncs: list[tuple[float, float]]
) -> list[float | None]:
    """When each reply's record was on disk (None: not by the kill). Its command was in an
    AOF write that ended before the reply, at the latest the last one; an fsync that
    began after that write ended covers it."""
    write_ends = [end for _, end in writes]
    sync_starts = [start for start, _ in syncs]
    found: list[float | None] = []
    for at in acknowledged:
        written = bisect.bisect_right(write_ends, at) - 1
        if written < 0:
            found.append(None)
            continue
        cover = bisect.bisect_left(sync_starts, write_ends[written])
        found.append(syncs[cover][1] if cover < len(syncs) else None)
    return found


def _states(client: Any, store: Any, keys: list[str]) -> dict[str, bytes | None]:
    found: dict[str, bytes | None] = {}
    for begin in range(0, len(keys), 500):
        chunk = keys[begin : begin + 500]
        with client.pipeline(transaction=False) as pipe:
            for key in chunk:
                pipe.hget(store.record_key("aof", key), "state")
            found.update(zip(chunk, pipe.execute(), strict=True))
    return found


def table(runs: list[Run]) -> str:
    lines = [
        "| appendfsync | run | acknowledged claims / completions | lost to the SIGKILL "
        "(claims / completions) | acknowledged, not yet fsynced at the kill | the oldest of "
        "them, before the kill (ms) | reply to fsync, median / max (ms) | fsyncs |",
        "|---|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for i, run in enumerate(runs):
        n = sum(other.fsync == run.fsync for other in runs[: i + 1])  # the mode's own count
        waits = run.waits_ms or [float("nan")]
        lines.append(
            f"| {run.fsync} | {n} | {run.acknowledged[0]} / {run.acknowledged[1]} "
            f"| {run.lost[0]} / {run.lost[1]} | {run.at_risk} "
            f"| {run.kill_window_ms:.0f} | {statistics.median(waits):.0f} / {max(waits):.0f} "
            f"| {run.fsyncs} |"
        )
    return "\n".join(lines)


NOTES = """\
"Lost to the SIGKILL" counts what the restarted server did not hold: Redis writes each
command to its AOF before it replies, so a process crash loses no acknowledged record in
either mode. The next columns are what a machine crash (power loss, kernel panic) at the
kill would have lost: the acknowledged records whose AOF write no fsync had covered yet,
and how long before the kill the oldest of them was acknowledged. "Reply to fsync" is how
long each acknowledged record waited for the fsync that covered it. A reply is matched
to the last AOF write that ended before it, which may hold later commands than its own:
the figures lean long (under `always` the fsync precedes the reply, and its maximum of a
few ms is that rounding).
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=3.0, help="load before each kill")
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--fsync", nargs="+", default=["everysec", "always"])
    parser.add_argument("--out", type=Path)
    options = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    load = os.getloadavg()[0]
    runs = [
        one_run(fsync, options.seconds, options.writers)
        for fsync in options.fsync
        for _ in range(options.runs)
    ]
    redis_version = subprocess.run(
        [redis_server_binary() or "redis-server", "--version"], capture_output=True, text=True
    ).stdout.split()[2]
    text = (
        f"`python -m chaos.aof_window --runs {options.runs} --seconds {options.seconds:g} "
        f"--writers {options.writers}` on {time.strftime('%Y-%m-%d')}: "
        f"{platform.machine()}, {os.cpu_count()} CPUs, Linux {platform.release()}, Python "
        f"{platform.python_version()}, Redis {redis_version.removeprefix('v=')}, AOF on "
        f"a local disk ({_filesystem()}); load average {load:.1f} at the start (the "
        f"machine is shared).\n\n{table(runs)}\n\n{NOTES}"
    )
    print(text)  # noqa: T201 - the report
    if options.out:
        options.out.write_text(text)
    return 0


def _filesystem() -> str:
    found = subprocess.run(
        ["df", "--output=fstype", tempfile.gettempdir()], capture_output=True, text=True
    ).stdout.split()
    return found[-1] if found else "unknown"


if __name__ == "__main__":
    sys.exit(main())
