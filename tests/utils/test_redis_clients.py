"""RedisStore's redis-py clients (``idempotency.utils.redis_clients``): built from a URL, from
Django's own ``RedisCache`` or from django-redis; their pools cap the connections; a reply
meant for another command is never taken for a record; TLS.

The tests that bend a server (a proxy spoiling its replies, a pool filled to its cap, TLS)
run against a private ``redis-server``; the others against ``REDIS_URL``.
"""

from __future__ import annotations

import asyncio
import gc
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from chaos.services import free_port
from idempotency.exceptions import StoreNotDurable, StoreUnavailable
from idempotency.stores.base import ClaimStatus, StoredResponse
from idempotency.stores.redis import RedisStore
from idempotency.utils.redis_clients import RedisConnector, cache_connection
from tests.support.faults import private_redis
from tests.support.ports import connections_to
from tests.support.redis_proxy import ReplyProxy
from tests.support.services import redis_url

SCOPE = "auth.user:1"
ALICE = StoredResponse(201, [("Content-Type", "application/json")], b'{"card": "4242"}')


def _claim(store: RedisStore, key: str, fingerprint: str = "fp") -> Any:
    return store.claim(SCOPE, key, fingerprint=fingerprint, lease=30, ttl=600)


async def _aclaim(store: RedisStore, key: str, fingerprint: str = "fp") -> Any:
    return await store.aclaim(SCOPE, key, fingerprint=fingerprint, lease=30, ttl=600)


# -- built from a URL, Django's RedisCache or django-redis ---------------------------------


def _caches(url: str) -> dict[str, Any]:
    return {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
        "builtin": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": url,
            "OPTIONS": {"socket_timeout": 2},
        },
        "django_redis": {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": url,
            "OPTIONS": {"SOCKET_TIMEOUT": 2, "CONNECTION_POOL_KWARGS": {"max_connections": 7}},
        },
    }


@pytest.mark.redis
@pytest.mark.parametrize("source", ["url", "builtin", "django_redis"])
def test_a_store_from_a_url_djangos_redis_cache_or_django_redis(source: str) -> None:
    url = redis_url()
    with override_settings(CACHES=_caches(url)):
        store = RedisStore(url) if source == "url" else RedisStore(cache=source)
        key = f"k-{uuid.uuid4()}"
        first = _claim(store, key)
        assert first.status is ClaimStatus.CLAIMED
        assert store.complete(SCOPE, key, fence=first.fence, response=ALICE, ttl=600)
        again = asyncio.run(_aclaim(store, key))
        assert again.status is ClaimStatus.COMPLETED and again.response == ALICE
        # the store's own redis-py client, on the cache's server and database
        kwargs = store.client.connection_pool.connection_kwargs
        assert kwargs["db"] == int(url.rsplit("/", 1)[1])
        if source != "url":
            assert kwargs["socket_timeout"] == 2


def test_options_are_read_from_either_cache_backend() -> None:
    caches = {
        "builtin": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": ["redis://primary:6379/2", "redis://replica:6379/2"],
            "OPTIONS": {"pool_class": "redis.BlockingConnectionPool", "serializer": "x.Y"},
        },
        "django_redis": {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": "redis://primary:6379/3,redis://replica:6379/3",
            "OPTIONS": {
                "CLIENT_CLASS": "django_redis.client.DefaultClient",
                "PASSWORD": "secret",
                "SOCKET_CONNECT_TIMEOUT": 1,
                "CONNECTION_POOL_KWARGS": {"max_connections": 9},
                "SERIALIZER": "django_redis.serializers.json.JSONSerializer",
            },
        },
        "locmem": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    }
    import redis

    with override_settings(CACHES=caches):
        # the first LOCATION is the primary: never a replica
        assert cache_connection("builtin") == (
            "redis://primary:6379/2",
            {"pool_class": redis.BlockingConnectionPool},
        )
        assert cache_connection("django_redis") == (
            "redis://primary:6379/3",
            {"password": "secret", "socket_connect_timeout": 1, "max_connections": 9},
        )
        with pytest.raises(ImproperlyConfigured, match="not a Redis cache"):
            cache_connection("locmem")
        with pytest.raises(ImproperlyConfigured, match="not in CACHES"):
            cache_connection("missing")
        with pytest.raises(ImproperlyConfigured, match="exactly one"):
            RedisConnector("redis://x:6379/0", cache="builtin")
        with pytest.raises(ImproperlyConfigured, match="not a redis://"):
            RedisConnector("http://x:6379/0")
        pool = RedisStore(cache="django_redis").client.connection_pool
        assert isinstance(pool, redis.BlockingConnectionPool) and pool.max_connections == 9


# -- the pool's cap ----------------------------------------------------------------------


def _connections_received(client: Any) -> int:
    return int(client.info("stats")["total_connections_received"])


@pytest.mark.chaos
@pytest.mark.parametrize("cap", [20, 200])
def test_200_concurrent_async_requests_open_at_most_max_connections(cap: int) -> None:
    """The server is frozen while 200 claims start, so all 200 are in flight at once; with
    ``max_connections=20`` the server accepted 20 connections in all (the rest waited for
    one, none failed), with a cap of 200 about one per claim. Counted by the server
    (``total_connections_received``)."""
    with private_redis() as server:
        observer = server.client()
        store = RedisStore(server.url, max_connections=cap, socket_timeout=10, pool_timeout=30)
        keys = [f"k-{i}" for i in range(200)]

        async def requests() -> list[Any]:
            store.connector.async_client()  # made before the count starts
            before = _connections_received(observer)
            held = connections_to(server.port)  # the observer's
            server.freeze()
            try:
                tasks = [asyncio.ensure_future(_aclaim(store, key)) for key in keys]
                # every connection the pool may open is open (the kernel accepts them for
                # the frozen server); each other claim waits for one of them
                deadline = time.monotonic() + 30
                while connections_to(server.port) - held < min(cap, len(keys)):
                    assert time.monotonic() < deadline, connections_to(server.port) - held
                    await asyncio.sleep(0)  # real time: none, yields to the claims' tasks
            finally:
                server.thaw()
            claims = await asyncio.gather(*tasks)
            finished = [
                await store.acomplete(SCOPE, k, fence=c.fence, response=ALICE, ttl=60)
                for k, c in zip(keys, claims, strict=True)
            ]
            assert all(finished)
            opened = _connections_received(observer) - before - 1  # less the INFO's own
            return [claims, opened]

        claims, opened = asyncio.run(requests())
    assert all(claim.status is ClaimStatus.CLAIMED for claim in claims)
    assert 1 <= opened <= cap
    if cap == 200:
        assert opened > 20  # the count can see more: the cap of 20 is what held it


# -- a duplicated reply ------------------------------------------------------------------


@pytest.mark.chaos
@pytest.mark.parametrize("fault", ["duplicate", "late-duplicate"])
@pytest.mark.parametrize("side", ["sync", "async"])
def test_a_duplicated_reply_never_answers_another_request(fault: str, side: str) -> None:
    """Alice's replay is answered twice by a proxy (at once, or its copy held back until
    just before the next reply). Bob's first request, next on that connection, gets his
    own claim (a clean retry; a 503 would do too): never Alice's stored payment."""
    with private_redis() as server:
        proxy = ReplyProxy(server.port)
        try:
            store = RedisStore(proxy.url(), max_connections=1, socket_timeout=5)
            alice, bob = f"alice-{uuid.uuid4()}", f"bob-{uuid.uuid4()}"
            if side == "async":
                replay, bobs = asyncio.run(_scenario_async(store, alice, bob, proxy, fault))
            else:
                replay, bobs = _scenario_sync(store, alice, bob, proxy, fault)
        finally:
            proxy.close()
    assert proxy.applied == [fault]
    assert replay.status is ClaimStatus.COMPLETED and replay.response == ALICE
    # a clean retry: the claim sent once more, on a connection the pool checked
    assert bobs is not StoreUnavailable
    assert bobs.status is ClaimStatus.CLAIMED and bobs.response is None, bobs


def _scenario_sync(
    store: RedisStore, alice: str, bob: str, proxy: ReplyProxy, fault: str
) -> tuple[Any, Any]:
    first = _claim(store, alice)
    assert store.complete(SCOPE, alice, fence=first.fence, response=ALICE, ttl=600)
    proxy.arm(fault, store.record_key(SCOPE, alice).encode())
    replay = _claim(store, alice)
    try:
        bobs: Any = _claim(store, bob, fingerprint="bob")
    except StoreUnavailable:
        bobs = StoreUnavailable
    return replay, bobs


async def _scenario_async(
    store: RedisStore, alice: str, bob: str, proxy: ReplyProxy, fault: str
) -> list[Any]:
    first = await _aclaim(store, alice)
    assert await store.acomplete(SCOPE, alice, fence=first.fence, response=ALICE, ttl=600)
    proxy.arm(fault, store.record_key(SCOPE, alice).encode())
    replay = await _aclaim(store, alice)
    try:
        bobs: Any = await _aclaim(store, bob, fingerprint="bob")
    except StoreUnavailable:
        bobs = StoreUnavailable
    return [replay, bobs]


# -- TLS ---------------------------------------------------------------------------------


@pytest.fixture
def tls_files(tmp_path: Path) -> Iterator[dict[str, str]]:
    """A self-signed certificate for 127.0.0.1 (``openssl``), as a CA and a server's."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("needs openssl to make a certificate")
    key, cert = tmp_path / "server.key", tmp_path / "server.crt"
    subprocess.run(
        [
            openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
            "-addext", "subjectAltName=IP:127.0.0.1",
        ],
        check=True, capture_output=True,
    )  # fmt: skip
    yield {"key": str(key), "cert": str(cert)}


@pytest.mark.chaos
def test_rediss_against_a_private_tls_redis(tls_files: dict[str, str]) -> None:
    """``rediss://`` to a ``redis-server --tls-port`` whose certificate is self-signed: the
    store verifies it against that certificate (``ssl_ca_certs``), sync and async, and
    refuses a server it cannot verify."""
    tls_port = free_port()
    extra = (
        "--tls-port", str(tls_port), "--tls-cert-file", tls_files["cert"],
        "--tls-key-file", tls_files["key"], "--tls-ca-cert-file", tls_files["cert"],
        "--tls-auth-clients", "no",
    )  # fmt: skip
    with private_redis(extra=extra):
        url = f"rediss://127.0.0.1:{tls_port}/0"
        store = RedisStore(url, ssl_ca_certs=tls_files["cert"], socket_timeout=5)
        key = f"k-{uuid.uuid4()}"
        first = _claim(store, key)
        assert first.status is ClaimStatus.CLAIMED
        assert asyncio.run(store.acomplete(SCOPE, key, fence=first.fence, response=ALICE, ttl=60))
        assert _claim(store, key).response == ALICE
        assert store.client.connection_pool.connection_class.__name__ == "SSLConnection"
        unverified = RedisStore(url, socket_timeout=5)
        with pytest.raises(StoreUnavailable):
            _claim(unverified, f"k-{uuid.uuid4()}")


# -- a lost reply: the resend recognises itself --------------------------------------------


@pytest.mark.chaos
@pytest.mark.parametrize("side", ["sync", "async"])
def test_a_claim_and_a_completion_whose_replies_were_lost_recognise_themselves(
    side: str,
) -> None:
    """The proxy lets the claim reach the server, then drops its reply and the connection;
    redis-py sends the claim again (the same fence) and it is answered as claimed, not in
    progress (no self-conflict). The same for the completion: answered as stored, not
    refused (no false stale owner). The record holds the one claim's fence and response."""
    with private_redis() as server:
        proxy = ReplyProxy(server.port)
        try:
            store = RedisStore(proxy.url(), socket_timeout=5)
            key = f"k-{uuid.uuid4()}"
            marker = store.record_key(SCOPE, key).encode()

            # the scripts loaded first: a dropped NOSCRIPT would prove nothing
            warm = _claim(store, "warm-up")
            store.complete(SCOPE, "warm-up", fence=warm.fence, response=ALICE, ttl=60)

            async def scenario() -> tuple[Any, bool]:
                proxy.arm("drop", marker)
                claim = await _aclaim(store, key)
                proxy.arm("drop", marker)
                done = await store.acomplete(SCOPE, key, fence=claim.fence, response=ALICE, ttl=60)
                return claim, done

            if side == "async":
                claim, done = asyncio.run(scenario())
            else:
                proxy.arm("drop", marker)
                claim = _claim(store, key)
                proxy.arm("drop", marker)
                done = store.complete(SCOPE, key, fence=claim.fence, response=ALICE, ttl=60)
        finally:
            proxy.close()
        record = server.client().hgetall(store.record_key(SCOPE, key))  # type: ignore[attr-defined]
    assert proxy.applied == ["drop", "drop"]
    assert claim.status is ClaimStatus.CLAIMED and not claim.taken_over
    assert done is True
    assert record[b"state"] == b"c" and record[b"fence"] == str(claim.fence).encode()
    assert record[b"body"] is not None


class Refused(Exception):
    """The work's failure: the engine releases the key."""


@pytest.mark.chaos
@pytest.mark.parametrize("side", ["sync", "async"])
def test_a_release_whose_reply_was_lost_recognises_itself(side: str) -> None:
    """The proxy lets a release reach the server, then drops its reply and the connection;
    redis-py sends the release again, which finds the tombstone its first send left and
    answers True (not "not the owner"). Through the engine (a function whose work fails)
    no ``stale_owner`` signal is sent, and another request then claims the key at once
    and gets a clean record: no fields of the released one, no takeover."""
    stale: list[Any] = []

    def on_stale(**kwargs: Any) -> None:
        stale.append(kwargs.get("fence"))

    from idempotency import idempotent_function, signals

    with private_redis() as server:
        proxy = ReplyProxy(server.port)
        signals.stale_owner.connect(on_stale, weak=False)
        try:
            store = RedisStore(proxy.url(), socket_timeout=5)
            key, engine_key = f"k-{uuid.uuid4()}", f"e-{uuid.uuid4()}"
            marker = store.record_key(SCOPE, key).encode()
            warm = _claim(store, "warm-up")  # the scripts loaded first, as above
            store.release(SCOPE, "warm-up", fence=warm.fence)
            store.delete(SCOPE, "warm-up")

            def work(name: str) -> str:
                proxy.arm("drop", store.record_key("functions", name).encode())
                raise Refused(name)  # the next command on the record: the release

            async def awork(name: str) -> str:
                return work(name)

            fails = idempotent_function(key="{name}", store=store, lease=30)(
                awork if side == "async" else work
            )
            runs = idempotent_function(key="{name}", store=store, lease=30)(lambda name: name)

            async def scenario() -> tuple[Any, bool, Any]:
                first = await _aclaim(store, key)
                proxy.arm("drop", marker)
                released = await store.arelease(SCOPE, key, fence=first.fence)
                with pytest.raises(Refused):
                    await fails(engine_key)
                return first, released, await _aclaim(store, key, fingerprint="other")

            if side == "async":
                first, released, second = asyncio.run(scenario())
            else:
                first = _claim(store, key)
                proxy.arm("drop", marker)
                released = store.release(SCOPE, key, fence=first.fence)
                with pytest.raises(Refused):
                    fails(engine_key)
                second = _claim(store, key, fingerprint="other")
            assert runs(engine_key) == engine_key  # the released key ran again at once
        finally:
            signals.stale_owner.disconnect(on_stale)
            proxy.close()
        record = server.client().hgetall(store.record_key(SCOPE, key))  # type: ignore[attr-defined]
    assert proxy.applied == ["drop", "drop"]
    assert released is True
    assert stale == []
    assert second.status is ClaimStatus.CLAIMED and second.fence != first.fence
    assert not second.taken_over and not second.recovery_point and second.recovery_data is None
    # a fresh hash: the new claim's fields, and the released fence for a late resend
    assert record[b"state"] == b"p" and record[b"fp"] == b"other"
    assert record[b"fence"] == str(second.fence).encode()
    assert record[b"rf"] == str(first.fence).encode()
    assert not {b"to", b"rp", b"rd", b"status", b"body", b"mac"} & set(record)


@pytest.mark.redis
@pytest.mark.parametrize("point", [False, True])
def test_a_release_sent_again_late_is_answered_true_and_changes_nothing(point: bool) -> None:
    """A release sent again after another request claimed the key (its tombstone gone,
    or, with a recovery point, the kept record taken over) still answers True and leaves
    the new owner's record as it was. A tombstone is absent to lookup, delete and every
    fenced script."""
    store = RedisStore(redis_url())
    key = f"k-{uuid.uuid4()}"
    first = _claim(store, key)
    if point:
        assert store.save_recovery_point(SCOPE, key, fence=first.fence, name="charged")
    assert store.release(SCOPE, key, fence=first.fence)
    assert store.release(SCOPE, key, fence=first.fence)  # sent again: still released
    if not point:
        assert store.lookup(SCOPE, key, fingerprint="fp") is None
        assert not store.extend(SCOPE, key, fence=first.fence, lease=30)
        assert not store.save_recovery_point(SCOPE, key, fence=first.fence, name="x")
        assert not store.complete(SCOPE, key, fence=first.fence, response=ALICE, ttl=60)
        assert asyncio.run(store.alookup(SCOPE, key, fingerprint="fp")) is None
        ttl = store.client.pttl(store.record_key(SCOPE, key))
        assert 0 < ttl <= 60_000  # the tombstone's short life, not the record's TTL
    second = _claim(store, key)
    assert second.status is ClaimStatus.CLAIMED
    assert second.taken_over is point and (second.recovery_point == "charged") is point
    before = store.client.hgetall(store.record_key(SCOPE, key))
    assert store.release(SCOPE, key, fence=first.fence)  # a late resend
    assert asyncio.run(store.arelease(SCOPE, key, fence=first.fence))
    assert store.client.hgetall(store.record_key(SCOPE, key)) == before
    # a stale owner that never released is still refused
    assert not store.release(SCOPE, key, fence=first.fence + 1)
    assert store.complete(SCOPE, key, fence=second.fence, response=ALICE, ttl=60)
    assert store.release(SCOPE, key, fence=first.fence)  # a resend even after completion
    assert _claim(store, key).response == ALICE
    # delete: a tombstone counts as absent
    assert store.delete(SCOPE, key)
    third = _claim(store, key)
    assert store.release(SCOPE, key, fence=third.fence)
    assert not store.delete(SCOPE, key)
    assert not asyncio.run(store.adelete(SCOPE, key))


# -- WAIT: one round trip ----------------------------------------------------------------


def _commands(client: Any) -> dict[str, int]:
    """Calls per command since the last ``CONFIG RESETSTAT`` (``INFO commandstats``)."""
    stats = client.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(s["calls"]) for name, s in stats.items()}


@pytest.mark.chaos
@pytest.mark.parametrize("side", ["sync", "async"])
def test_waiting_for_replicas_sends_the_script_and_wait_only(side: str) -> None:
    """With ``wait_replicas`` a claim is its script and ``WAIT`` in one pipeline: no
    ``SCRIPT EXISTS`` ahead of it (a round trip more). A server that forgot its scripts
    (``SCRIPT FLUSH``) has the script loaded again and the completion stored. The private
    server has no replica: the claim is refused as not durable and released, the
    completion stored with a warning."""
    with private_redis() as server:
        observer: Any = server.client()
        waiting = RedisStore(server.url, wait_replicas=1, wait_timeout=0.01)
        plain = RedisStore(server.url)
        key = f"k-{uuid.uuid4()}"
        claim = _claim(plain, key)

        async def scenario() -> bool:
            with pytest.raises(StoreNotDurable):
                await _aclaim(waiting, "refused")
            observer.script_flush()
            observer.config_resetstat()
            return await waiting.acomplete(SCOPE, key, fence=claim.fence, response=ALICE, ttl=60)

        if side == "async":
            done = asyncio.run(scenario())
        else:
            with pytest.raises(StoreNotDurable):
                _claim(waiting, "refused")
            observer.script_flush()
            observer.config_resetstat()
            done = waiting.complete(SCOPE, key, fence=claim.fence, response=ALICE, ttl=60)
        sent = _commands(observer)
        refused = plain.lookup(SCOPE, "refused", fingerprint="fp")
    assert done is True
    assert refused is None  # released once no replica acknowledged it
    # NOSCRIPT, the script loaded, the pipeline once more; never SCRIPT EXISTS
    assert sent.get("evalsha") == 2 and sent.get("script|load") == 1, sent
    assert sent.get("wait") == 2 and "script|exists" not in sent, sent


# -- packing -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ("EVALSHA", "0" * 40, 1, "p:{k}:rec", "f" * 64, 2**62, 30_000, "POST", "/r\u00e9sum\u00e9"),
        ("HSET", b"k", b"\x00body\xff", memoryview(b"view"), -5, 2**70, 1.5, 0.1),
        ("SCRIPT LOAD", "return 1"),
        (b"CLIENT SETNAME", b"name"),
        ("SET", "k", bytearray(b"bytes")),
    ],
)
def test_the_sync_client_packs_commands_as_redis_py_does(args: tuple[Any, ...]) -> None:
    """The store's sync connections pack with hiredis directly: the same bytes as a
    redis-py ``Connection`` of the same encoding, whatever the arguments (or the same
    refusal: redis-py 5.0 with hiredis cannot pack a ``bytearray``)."""
    import redis

    # packing needs no server: nothing connects
    pool = RedisStore("redis://127.0.0.1:1/0").client.connection_pool
    ours = pool.connection_class(**pool.connection_kwargs)  # as the pool makes them
    assert _packed(ours, args) == _packed(redis.Connection(), args)


def _packed(connection: Any, args: tuple[Any, ...]) -> bytes | str:
    try:
        return b"".join(connection.pack_command(*args))
    except Exception as refused:  # noqa: BLE001 - the refusal is what is compared
        return type(refused).__name__


@pytest.mark.redis
@pytest.mark.parametrize("value", [True, None])
def test_an_argument_redis_py_refuses_is_refused_as_before(value: Any) -> None:
    import redis

    store = RedisStore(redis_url())
    with pytest.raises(redis.DataError):
        store.client.set(f"k-{uuid.uuid4()}", value)


@pytest.mark.redis
def test_a_cache_with_another_encoding_keeps_redis_pys_packer() -> None:
    """A Latin-1 connection (the cache's ``OPTIONS``) sends what redis-py's own client with
    that encoding sends: the store's packer is not put in its place. (redis-py 8 sends
    Latin-1; 5.0 with hiredis packs UTF-8 whatever the encoding: the same as the store.)"""
    import redis

    caches = {
        "latin": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": redis_url(),
            "OPTIONS": {"encoding": "latin-1"},
        }
    }
    with override_settings(CACHES=caches):
        store = RedisStore(cache="latin")
        assert "command_packer" not in store.client.connection_pool.connection_kwargs
        theirs = redis.Redis.from_url(redis_url(), encoding="latin-1")
        ours_key, their_key = f"k-{uuid.uuid4()}", f"k-{uuid.uuid4()}"
        store.client.set(ours_key, "r\u00e9sum\u00e9")
        theirs.set(their_key, "r\u00e9sum\u00e9")
        sent = store.client.get(ours_key)
        assert sent == theirs.get(their_key)
        assert sent in (b"r\xe9sum\xe9", b"r\xc3\xa9sum\xc3\xa9")
        theirs.delete(ours_key, their_key)
        theirs.close()


def _connections_named(name: str) -> int:
    import redis

    with redis.Redis.from_url(redis_url()) as admin:
        return sum(1 for client in admin.client_list() if client.get("name") == name)


@pytest.mark.redis
def test_an_async_client_is_closed_on_its_loop_when_the_loop_ends() -> None:
    """Left open, the connections of a loop's client were closed by the garbage collector
    after the loop had closed: redis-py's ``__del__`` raised "Event loop is closed" (an
    unraisable exception, which CPython 3.11.7 turned into a SystemError in a later
    ``ast.parse``)."""
    name = f"loop-end-{uuid.uuid4().hex[:12]}"
    held = [RedisConnector(redis_url(), client_name=name)]

    async def use() -> tuple[int, Any]:
        client = held[0].async_client()
        assert held[0].async_client() is client  # one client per loop
        await client.ping()
        return _connections_named(name), client

    open_during, first = asyncio.run(use())
    assert open_during == 1
    # the server saw the connection closed by the time asyncio.run returned... or a moment
    # later (it reads the close from its socket): poll the real server, up to 5 s
    deadline = time.monotonic() + 5
    while _connections_named(name) and time.monotonic() < deadline:
        time.sleep(0.02)  # real time: the server reads the close on its own loop
    assert _connections_named(name) == 0

    # a new loop gets a new client, and dropping everything raises nothing unraisable
    _, second = asyncio.run(use())
    assert second is not first
    unraisable: list[Any] = []
    previous, sys.unraisablehook = sys.unraisablehook, unraisable.append
    try:
        held.clear()
        del first, second
        gc.collect()
    finally:
        sys.unraisablehook = previous
    assert unraisable == []
