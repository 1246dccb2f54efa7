"""Whole requests counted by :mod:`bench.redis_parts`: a warmed-up block of requests
through Django's WSGI handler (as :mod:`bench.instructions` makes them) or its
``ASGIHandler`` on one event loop (in a process of ``bench.settings_asgi``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

#: Request paths (variant, path) that can be counted beside the parts, as
#: :mod:`bench.instructions` counts them (one request through Django's WSGI handler).
REQUESTS = (
    ("bare", "first"),
    ("redis", "first"),
    ("db-atomic", "first"),
    ("noop", "replay"),
    ("redis", "replay"),
    ("db-atomic", "replay"),
)


#: Async request paths (variant, path): one request through Django's ``ASGIHandler`` on
#: one event loop, in a process of the ASGI server's settings (``bench.settings_asgi``).
ASGI_REQUESTS = (
    ("async-bare", "first"),
    ("async-redis", "first"),
    ("async-redis", "replay"),
)


def request_blocks() -> dict[str, Callable[[int], Callable[[], None]]]:
    """``request:<variant>:<path>``: given a count, a warmed-up block of that many
    requests (their keys drawn beforehand), checked to answer as it should."""
    from bench.instructions import _check_answers, settings_and_url
    from bench.profile import caller, keys, setup

    app, token = setup()

    def block(variant: str, path: str) -> Callable[[int], Callable[[], None]]:
        def prepare(count: int) -> Callable[[], None]:
            call = caller(app, token, settings_and_url(variant)[1])
            _check_answers(variant, call, keys(path), path)
            next_key = keys(path)
            for _ in range(30):
                call(next_key())
            block = [next_key() for _ in range(count)]

            def run() -> None:
                for key in block:
                    call(key)

            return run

        return prepare

    return {f"request:{v}:{p}": block(v, p) for v, p in REQUESTS}


def asgi_blocks() -> dict[str, Callable[[int], Callable[[], None]]]:
    """``asgi:<variant>:<path>``, as :func:`request_blocks` (``bench.settings_asgi``)."""
    import asyncio

    from bench.profile import BODY, keys, setup
    from bench.variants import ASGI_VARIANTS

    _app, token = setup("bench.settings_asgi")
    from django.core.handlers.asgi import ASGIHandler

    handler = ASGIHandler()
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)

    async def request(path: str, key: str) -> int:
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": [
                (b"host", b"127.0.0.1"),
                (b"content-type", b"application/json"),
                (b"content-length", str(len(BODY)).encode()),
                (b"authorization", f"Token {token}".encode()),
                (b"idempotency-key", key.encode()),
            ],
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 8000),
        }
        received = False
        status: list[int] = []

        async def receive() -> dict[str, Any]:
            nonlocal received
            if not received:
                received = True
                return {"type": "http.request", "body": BODY, "more_body": False}
            await asyncio.Future()  # no disconnect: Django cancels this wait
            raise AssertionError("unreachable")

        async def send(message: Mapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])

        await handler(scope, receive, send)
        return status[0]

    def block(variant: str, path: str) -> Callable[[int], Callable[[], None]]:
        url = next(v.path for v in ASGI_VARIANTS if v.name == variant)
        expected = next(v.expected_status(path) for v in ASGI_VARIANTS if v.name == variant)

        def call(key: str) -> int:
            return loop.run_until_complete(request(url, key))

        def prepare(count: int) -> Callable[[], None]:
            next_key = keys(path)
            answers = {call(next_key()) for _ in range(30)}
            if path == "replay":
                answers = {call(next_key()) for _ in range(3)}
            if answers != {expected}:
                raise RuntimeError(f"{variant} {path}: answered {answers}, expected {expected}")
            block = [next_key() for _ in range(count)]

            def run() -> None:
                for key in block:
                    call(key)

            return run

        return prepare

    return {f"asgi:{v}:{p}": block(v, p) for v, p in ASGI_REQUESTS}
