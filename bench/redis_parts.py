"""Where one ``RedisStore`` command's instructions go: ``python -m bench.redis_parts``.

Every item runs in one process under ``valgrind --tool=callgrind``: warmed up, then
``--count`` calls between two calls of a C function nothing else calls (``MARK``), on
whose entry callgrind dumps its counts (``--dump-before``). A dump is the user-space
instructions of those calls, inclusive of everything they call, with no start-up to
cancel (:mod:`bench.instructions` runs a process per path and count and takes the
difference; this counts a dozen items in the time of one of its processes, which on a
loaded machine is the difference between minutes and an hour). The loop's own cost
(``loop``) is taken off every part. The parts, each through redis-py's public methods on
the store's own client (built as the benchmark's ``RedisStore`` builds it):

* ``store-replay``: ``RedisStore.claim`` meeting a completed record (a replay's one
  store call); ``store-lookup``: ``RedisStore.lookup`` of it;
* ``script``: the store's registered ``Script`` called (``Script.__call__``);
* ``evalsha``: ``Redis.evalsha`` with the script's SHA (the command's whole path);
* ``pool``: the pool's ``get_connection`` and ``release``; ``ensure``: its
  ``ensure_connection`` (``connect`` and the ``can_read`` poll) on its own;
* ``pack``: the connection's ``pack_command``; ``wire``: ``send_packed_command`` and
  ``read_response`` on a connection held out of the pool (the socket calls and hiredis'
  parsing);
* ``retry``: the connection's ``Retry.call_with_retry`` around a no-op;
* ``observe``: one ``record_operation_duration`` (redis-py's observability hook, off);
* ``async-replay``: ``RedisStore.aclaim`` meeting the completed record, and
  ``async-evalsha``: ``redis.asyncio.Redis.evalsha``, each run to completion on one
  event loop (``async-loop``, a no-op coroutine run the same way, taken off instead of
  ``loop``).

Where the store still has its own connections (before issue 44), ``channel`` is a
command on them (``Channel.run_script``). ``--requests`` adds whole requests as
:mod:`bench.instructions` makes them (``request:<variant>:<path>``, through Django's WSGI
handler), ``--asgi`` async ones through Django's ``ASGIHandler`` on one event loop
(``asgi:<variant>:<path>``, in a second process of ``bench.settings_asgi``). Uses the
benchmark's database and Redis as :mod:`bench.instructions` left them (it creates and
migrates the database; this does not, nor does it flush Redis: it writes records of its
own).
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.counted_requests import ASGI_REQUESTS, REQUESTS, asgi_blocks, request_blocks

#: Calls counted per item.
COUNT = 200
PARTS = (
    "loop",
    "store-replay",
    "store-lookup",
    "channel",
    "script",
    "evalsha",
    "pool",
    "ensure",
    "pack",
    "wire",
    "retry",
    "observe",
    "async-loop",
    "async-replay",
    "async-evalsha",
)


def parts() -> dict[str, Callable[[], object]]:
    """The parts this checkout has, each a no-argument call."""
    from bench.profile import setup

    setup()
    from idempotency.stores.records import StoredResponse, new_fence
    from idempotency.stores.redis import RedisStore

    store = RedisStore(cache="default")
    scope, key, fingerprint = f"bench-parts-{os.getpid()}", "replayed", "f" * 64
    store.delete(scope, key)
    claimed = store.claim(scope, key, fingerprint=fingerprint, lease=30, ttl=3600)
    response = StoredResponse.from_parts(201, "{}", b'{"id": 1}')
    store.complete(
        scope, key, fence=claimed.fence, response=response, ttl=3600, fingerprint=fingerprint
    )
    record = store.record_key(scope, key)
    client = store.client
    script = client.register_script("return ARGV[1]")
    script(keys=[record], args=[new_fence()])
    token = new_fence()
    found: dict[str, Callable[[], object]] = {
        "loop": lambda: None,
        "store-replay": lambda: store.claim(
            scope, key, fingerprint=fingerprint, lease=30, ttl=3600
        ),
        "store-lookup": lambda: store.lookup(scope, key, fingerprint=fingerprint),
        "script": lambda: script(keys=[record], args=[token]),
        "evalsha": lambda: client.evalsha(script.sha, 1, record, token),
    }
    try:
        from idempotency.stores.redis_channel import channel_for  # type: ignore[import-not-found]
    except ImportError:
        pass
    else:
        channel = channel_for(client)
        if channel is not None:
            found["channel"] = lambda: channel.run_script(script, [record], [token])
    pool = client.connection_pool
    held = pool.get_connection()  # out of the pool for good: the wire's own
    packed = held.pack_command("EVALSHA", script.sha, 1, record, token)

    def checkout() -> None:
        pool.release(pool.get_connection())

    def wire() -> None:
        held.send_packed_command(packed)
        held.read_response()

    found.update(
        {
            "pool": checkout,
            "ensure": lambda: pool.ensure_connection(held),
            "pack": lambda: held.pack_command("EVALSHA", script.sha, 1, record, token),
            "wire": wire,
            "retry": _retry(held),
        }
    )
    observe = _observe(held)
    if observe is not None:
        found["observe"] = observe
    if not hasattr(pool, "ensure_connection"):
        del found["ensure"]
    found.update(_async_parts(store, scope, key, fingerprint, record, script.sha, token))
    return found


def _async_parts(
    store: Any, scope: str, key: str, fingerprint: str, record: str, sha: str, token: int
) -> dict[str, Callable[[], object]]:
    import asyncio

    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    client = loop.run_until_complete(_async_client(store))

    async def nothing() -> None:
        return None

    def replay() -> object:
        return loop.run_until_complete(
            store.aclaim(scope, key, fingerprint=fingerprint, lease=30, ttl=3600)
        )

    found: dict[str, Callable[[], object]] = {
        "async-loop": lambda: loop.run_until_complete(nothing()),
        "async-replay": replay,
    }
    if client is not None:
        found["async-evalsha"] = lambda: loop.run_until_complete(
            client.evalsha(sha, 1, record, token)
        )
    return found


async def _async_client(store: Any) -> Any:
    """The running loop's redis.asyncio client of the store (None before issue 44: its
    own async channel instead)."""
    connector = getattr(store, "connector", None)
    return connector.async_client() if connector is not None else None


def _retry(connection: Any) -> Callable[[], object]:
    def fail(error: Exception, *count: int) -> None:
        raise error

    retry = connection.retry
    return lambda: retry.call_with_retry(lambda: None, fail)


def _observe(connection: Any) -> Callable[[], object] | None:
    try:
        from redis.observability.recorder import record_operation_duration
    except ImportError:
        return None
    return lambda: record_operation_duration(
        command_name="EVALSHA",
        duration_seconds=time.monotonic(),
        server_address=connection.host,
        server_port=connection.port,
        db_namespace=str(connection.db),
    )


#: A C function nothing else calls: callgrind dumps its counts each time it is entered
#: (``--dump-before``), so one process counts every item between two of its calls.
MARK = "os_sched_get_priority_max"


def mark() -> None:
    os.sched_get_priority_max(os.SCHED_OTHER)


def run(names: list[str], count: int) -> None:
    """The measured process: each item warmed up, then ``count`` calls between two marks."""
    if any(n.startswith("asgi:") for n in names):
        # a process of the ASGI server's settings: its items only
        table: dict[str, Callable[[], object]] = {}
        blocks = asgi_blocks()
    else:
        table = parts()
        blocks = request_blocks() if any(n.startswith("request:") for n in names) else {}
    for name in names:
        if name in blocks:
            runner = blocks[name](count)
        else:
            call = table[name]
            for _ in range(50):
                call()

            def runner(call: Callable[[], object] = call) -> None:
                for _ in range(count):
                    call()

        # what the warm-up left alive is frozen: a full collection lands in no count
        gc.collect()
        gc.freeze()
        mark()
        runner()
        mark()


def collected(names: list[str], count: int) -> dict[str, float]:
    """Instructions per call of each item, counted in one process under callgrind."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "callgrind.out"
        command = [
            "valgrind",
            "--tool=callgrind",
            f"--dump-before={MARK}",
            "--dump-instr=no",
            "--dump-line=no",
            f"--callgrind-out-file={out}",
            sys.executable,
            "-m",
            "bench.redis_parts",
            "--run",
            str(count),
            ",".join(names),
        ]
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        done = subprocess.run(command, capture_output=True, text=True, env=env)
        if done.returncode != 0:
            raise RuntimeError(f"failed under callgrind:\n{done.stderr[-3000:]}")
        dumps = sorted(
            Path(folder).glob("callgrind.out.*"), key=lambda f: int(f.name.rsplit(".", 1)[1])
        )
        totals = [int(re.search(r"^summary: (\d+)", f.read_text(), re.M).group(1)) for f in dumps]  # type: ignore[union-attr]
    # dump 1: start-up and the first warm-up; then each item's calls, each next warm-up
    measured = totals[1::2]
    if len(measured) < len(names):
        raise RuntimeError(f"{len(totals)} dumps for {len(names)} items")
    return {name: n / count for name, n in zip(names, measured, strict=False)}


def available() -> list[str]:
    """The parts this checkout has (asked of a process of its own: Django set up there)."""
    listed = subprocess.run(
        [sys.executable, "-m", "bench.redis_parts", "--list"],
        capture_output=True,
        text=True,
        check=True,
    )
    return listed.stdout.split()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.redis_parts", description=__doc__)
    parser.add_argument("--run", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--list", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, default=COUNT, help="calls counted per item")
    parser.add_argument(
        "--only",
        help="comma-separated items (default: every part this checkout has); "
        "request:<variant>:<path> for a request path ("
        + ", ".join(f"{v}:{p}" for v, p in REQUESTS)
        + ")",
    )
    parser.add_argument("--requests", action="store_true", help="the request paths too")
    parser.add_argument(
        "--asgi",
        action="store_true",
        help="the async request paths too (in a process of bench.settings_asgi): "
        + ", ".join(f"asgi:{v}:{p}" for v, p in ASGI_REQUESTS),
    )
    args = parser.parse_args(argv)
    if args.run:
        run(args.run[1].split(","), int(args.run[0]))
        return 0
    if args.list:
        print(" ".join(part for part in PARTS if part in parts()))
        return 0
    wanted = args.only.split(",") if args.only else available()
    if args.requests:
        wanted += [f"request:{v}:{p}" for v, p in REQUESTS if f"request:{v}:{p}" not in wanted]
    if args.asgi:
        wanted += [f"asgi:{v}:{p}" for v, p in ASGI_REQUESTS if f"asgi:{v}:{p}" not in wanted]
    # the ASGI paths in a process of their own settings; the rest in one process
    on_asgi = [name for name in wanted if name.startswith("asgi:")]
    others = [name for name in wanted if name not in on_asgi]
    if any(not name.startswith("request:") for name in others) and "loop" not in others:
        others.insert(0, "loop")
    if any(name.startswith("async-") for name in others) and "async-loop" not in others:
        others.append("async-loop")
    per = collected(others, args.count) if others else {}
    if on_asgi:
        per.update(collected(on_asgi, args.count))
    wanted = others + on_asgi
    print("| item | instructions per call |\n| --- | ---: |")
    for name in wanted:
        if name in ("loop", "async-loop"):
            continue
        base = (
            0.0
            if name.startswith(("request:", "asgi:"))
            else per["async-loop" if name.startswith("async-") else "loop"]
        )
        print(f"| {name} | {per[name] - base:,.0f} |")
    taken = ", ".join(f"{part} {per[part]:,.0f}" for part in ("loop", "async-loop") if part in per)
    print(f"\n(taken off the parts: {taken})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
