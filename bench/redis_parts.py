"""Where one ``RedisStore`` command's instructions go: ``python -m bench.redis_parts``.

Each part of the command's path runs ``FEW`` and then ``MANY`` times after a warm-up, in
a process of its own under ``valgrind --tool=callgrind`` (as :mod:`bench.instructions`
counts whole requests); the difference over ``MANY - FEW`` is one call's user-space
instructions, inclusive of everything it calls. The loop's own cost (``loop``) is taken
off every part. The parts, each through redis-py's public methods on the store's own
client (built as the benchmark's ``RedisStore`` builds it):

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
command on them (``Channel.run_script``). Uses the benchmark's database and Redis as
:mod:`bench.instructions` left them (it creates and migrates the database; this does
not, nor does it flush Redis: it writes one record of its own).
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

FEW, MANY = 200, 1000
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
    scope, key, fingerprint = "bench-parts", "replayed", "f" * 64
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
        from idempotency.stores.redis_channel import channel_for
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


def run(part: str, count: int) -> None:
    """The measured process: warm up, then ``count`` calls of ``part``."""
    call = parts()[part]
    for _ in range(50):
        call()
    gc.collect()
    gc.freeze()
    for _ in range(count):
        call()


def collected(part: str, count: int) -> int:
    command = [
        "valgrind",
        "--tool=callgrind",
        "--callgrind-out-file=/dev/null",
        sys.executable,
        "-m",
        "bench.redis_parts",
        "--run",
        part,
        str(count),
    ]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    match = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode != 0 or match is None:
        raise RuntimeError(f"{part} failed under callgrind:\n{done.stderr[-3000:]}")
    return int(match.group(1))


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
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="processes at once")
    parser.add_argument("--only", help="comma-separated parts (default: all this checkout has)")
    args = parser.parse_args(argv)
    if args.run:
        run(args.run[0], int(args.run[1]))
        return 0
    if args.list:
        print(" ".join(part for part in PARTS if part in parts()))
        return 0
    wanted = args.only.split(",") if args.only else available()
    if "loop" not in wanted:
        wanted.insert(0, "loop")
    if any(part.startswith("async-") for part in wanted) and "async-loop" not in wanted:
        wanted.append("async-loop")
    runs = [(part, n) for part in wanted for n in (FEW, MANY)]
    with ThreadPoolExecutor(max(1, args.jobs)) as workers:
        totals = dict(zip(runs, workers.map(lambda r: collected(*r), runs), strict=True))
    per = {part: (totals[(part, MANY)] - totals[(part, FEW)]) / (MANY - FEW) for part in wanted}
    print("| part | instructions per call |\n| --- | ---: |")
    for part in wanted:
        if part not in ("loop", "async-loop"):
            base = per["async-loop" if part.startswith("async-") else "loop"]
            print(f"| {part} | {per[part] - base:,.0f} |")
    taken = ", ".join(f"{part} {per[part]:,.0f}" for part in ("loop", "async-loop") if part in per)
    print(f"\n(taken off: {taken})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
