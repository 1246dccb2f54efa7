"""Profile and time the hot paths in-process, through Django's WSGI handler.

``python -m bench.profile``: pyinstrument profiles of our db-atomic first request and
replay (text, printed; ``--html DIR`` also writes HTML). ``python -m bench.profile
--compare``: interleaved in-process timings of bare / noop / our variants, the quick
way to see what a change to the hot path is worth before a full ``python -m bench``.

Uses the benchmark database and Redis (``bench/env.py``); run ``python -m bench --smoke``
once first so they are migrated.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

BODY = b'{"amount": 1, "memo": "bench"}'


def setup(settings: str = "bench.settings") -> tuple[Any, str]:
    """Django with ``settings`` (ours, or a peer's ``bench.settings_peer_*``); the WSGI
    application and the load user's token."""
    os.environ["DJANGO_SETTINGS_MODULE"] = settings
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.handlers.wsgi import WSGIHandler
    from rest_framework.authtoken.models import Token

    from bench.benchapp.models import Account

    user, _ = get_user_model().objects.get_or_create(username="bench-profile")
    Account.objects.get_or_create(user=user)
    token, _ = Token.objects.get_or_create(user=user)
    return WSGIHandler(), token.key


def caller(app: Any, token: str, path: str) -> Callable[[str], int]:
    """``call(key) -> status``: one POST through the WSGI handler, as gunicorn makes it."""

    def call(key: str) -> int:
        environ = {
            "REQUEST_METHOD": "POST",
            "PATH_INFO": path,
            "SCRIPT_NAME": "",
            "QUERY_STRING": "",
            "SERVER_NAME": "127.0.0.1",
            "SERVER_PORT": "8000",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "REMOTE_ADDR": "127.0.0.1",
            "CONTENT_TYPE": "application/json",
            "CONTENT_LENGTH": str(len(BODY)),
            "HTTP_HOST": "127.0.0.1",
            "HTTP_AUTHORIZATION": f"Token {token}",
            "HTTP_IDEMPOTENCY_KEY": key,
            "wsgi.input": io.BytesIO(BODY),
            "wsgi.url_scheme": "http",
            "wsgi.errors": sys.stderr,
            "wsgi.multithread": False,
            "wsgi.multiprocess": True,
            "wsgi.run_once": False,
            "wsgi.version": (1, 0),
        }
        status: list[str] = []
        body = app(environ, lambda s, h, exc_info=None: status.append(s))
        b"".join(body)
        body.close()
        return int(status[0].split()[0])

    return call


def keys(path_kind: str) -> Callable[[], str]:
    fixed = f"replay-{uuid.uuid4().hex}"
    if path_kind == "replay":
        return lambda: fixed
    return lambda: uuid.uuid4().hex


def profile(
    app: Any, token: str, variant: str, path_kind: str, requests: int, html: Path | None
) -> None:
    from pyinstrument import Profiler

    call = caller(app, token, f"/bench/{variant}/")
    next_key = keys(path_kind)
    for _ in range(50):
        call(next_key())
    profiler = Profiler(interval=0.0001)
    profiler.start()
    for _ in range(requests):
        call(next_key())
    profiler.stop()
    print(f"\n===== {variant} {path_kind}: {requests} requests =====")
    print(profiler.output_text(unicode=True, color=False, show_all=False))
    if html is not None:
        html.mkdir(parents=True, exist_ok=True)
        (html / f"{variant}-{path_kind}.html").write_text(profiler.output_html())


def compare(app: Any, token: str, rounds: int, requests: int) -> None:
    """Median µs per request of each (variant, path), interleaved round by round."""
    cases = [
        ("bare", "first"), ("db-atomic", "first"), ("db-lease", "first"), ("redis", "first"),
        ("db-redis-cache", "first"),
        ("noop", "replay"), ("db-atomic", "replay"), ("db-lease", "replay"),
        ("redis", "replay"), ("db-redis-cache", "replay"),
    ]  # fmt: skip
    calls = {case: (caller(app, token, f"/bench/{case[0]}/"), keys(case[1])) for case in cases}
    timings: dict[tuple[str, str], list[float]] = {case: [] for case in cases}
    for call, next_key in calls.values():
        for _ in range(30):
            call(next_key())
    for _ in range(rounds):
        for case, (call, next_key) in calls.items():
            started = time.perf_counter()
            for _ in range(requests):
                call(next_key())
            timings[case].append((time.perf_counter() - started) / requests * 1e6)
    print("| variant | path | µs/request (median of rounds) | ratio |")
    print("| --- | --- | ---: | ---: |")
    for case in cases:
        ref = ("bare", "first") if case[1] == "first" else ("noop", "replay")
        mine = statistics.median(timings[case])
        base = statistics.median(timings[ref])
        print(f"| {case[0]} | {case[1]} | {mine:.0f} | {base / mine:.2f} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.profile", description=__doc__)
    parser.add_argument("--compare", action="store_true", help="time every variant instead")
    parser.add_argument("--variant", default="db-atomic")
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--html", type=Path, help="also write HTML profiles to this folder")
    args = parser.parse_args(argv)
    app, token = setup()
    if args.compare:
        compare(app, token, args.rounds, max(1, args.requests // 10))
        return 0
    for path_kind in ("first", "replay"):
        profile(app, token, args.variant, path_kind, args.requests, args.html)
    return 0


if __name__ == "__main__":
    sys.exit(main())
