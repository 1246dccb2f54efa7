"""RedisStore: records as Redis hashes, every transition one Lua script, through redis-py's
public API.

The store's client is built from a ``redis://``, ``rediss://`` or ``unix://`` URL
(``location``) or from a Redis cache's settings (``cache``: Django's own
``RedisCache`` or django-redis'), by :class:`~idempotency.utils.redis_clients.RedisConnector`:
a ``redis.Redis`` (``RedisCluster`` with ``cluster=True``) and a ``redis.asyncio.Redis``
per running event loop, whose pools cap the connections (``max_connections``). Scripts
are sent by their SHA (the client's ``evalsha``; loaded with ``script_load`` after
``NOSCRIPT``), and a command that fails on a broken connection is resent by the client's
own retry policy.

A record lives under ``<prefix>:{<digest>}:rec``; the digest sits in a hash tag so the
record and anything kept beside it land on one Redis Cluster slot. Expiry is Redis's own
key TTL, so an expired record is absent the moment its TTL passes. The scripts judge
leases by the Redis server's clock (``TIME``); only the ``Retry-After`` estimate of
:meth:`RedisStore.lookup` reads the application's clock.

**A resend recognises itself.** The fencing token of a claim is drawn before the claim is
first sent, and every script is sent with it: a claim, a completion or a release whose
reply was lost (a dropped connection, a restarted server) and that the client sends again
finds its own token in the record (a release: in the tombstone it left) and answers as the
first send did (claimed; completed; released), never "in progress" or "not the owner". A
renewal or a recovery point sent again writes the same fields once more. A new record's
count (``MAX_NEW_RECORDS``) is not fenced: sent again, it counts twice. The claim's and
the lookup's replies carry the token (the lookup a fresh one; every fenced script its
fence) back, and a reply carrying another is refused as an outage (503): a reply meant
for another command (a proxy or a server that sent one twice) is never taken for the
record.

**Replication** is asynchronous: a primary that acknowledged a claim and died before its
replicas received it loses the claim at failover, and a retry may then run the work a
second time. With ``wait_replicas`` every claim, completion and recovery point is followed
by ``WAIT numreplicas timeout`` on the same connection (one pipeline): the view runs only
once the claim is on that many replicas, and a claim that could not be replicated in time
is released again and answered with 503
(:class:`~idempotency.exceptions.StoreNotDurable`). Records are read from the primary
only: a replica may lag.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, ClassVar, TypeVar

from idempotency.codecs import seal, unseal
from idempotency.conf import Setting
from idempotency.exceptions import StoreNotDurable
from idempotency.stores.base import BaseStore
from idempotency.stores.records import (
    ClaimStatus,
    KeyState,
    StoredResponse,
    new_fence,
    now_ms,
    quota_window,
    record_digest,
    sign,
    verify,
)
from idempotency.utils.backends import KEY_PREFIX
from idempotency.utils.backoff import Backoff
from idempotency.utils.hashing import log_ref
from idempotency.utils.outages import outage_raises_unavailable, store_operation
from idempotency.utils.redis_clients import CLIENT_OPTIONS, REDIS_CACHE, RedisBackend

__all__ = ["RedisStore"]

logger = logging.getLogger("idempotency.stores.redis")

T = TypeVar("T")
#: Seconds a store command keeps being sent again while Redis refuses connections.
RECONNECT_WINDOW = 3.0

#: Seconds a released key's tombstone is kept: longer than a release can be sent again
#: after its reply was lost (redis-py's retries, each after a socket timeout of 5 s by
#: default, then the reconnect window), so the resend still finds its own fence.
RELEASE_REMEMBERED = 60.0

# -- the scripts. A record is a hash: ``state`` (``p`` in progress, ``c`` completed, ``r``
# released: a tombstone), ``fp`` (the request fingerprint), ``fence``, ``lease`` (ms,
# server clock), ``to`` (``1``: taken over), the stored ``status``, ``headers`` and
# ``body``, the recovery point ``rp`` and its data ``rd``, a completed record's tag ``mac``
# (:mod:`~idempotency.stores.records`), ``rf`` (the fence of the last owner that
# released the key), and for the admin ``method``, ``route`` and ``created``.
#
# A release leaves a tombstone ``{state: r, rf: fence}`` for ``RELEASE_REMEMBERED``
# seconds instead of deleting the record, so that the release, sent again after its reply
# was lost, finds its own fence and answers 1 (not "not the owner", a false stale owner).
# Every script treats a tombstone as absent: a claim deletes it and starts a fresh hash
# (keeping only ``rf``, for that same resend), a lookup answers None, and the fenced
# scripts find no owner in it.

_NOW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
"""

#: ARGV: fingerprint, fence, lease ms, ttl ms, method, route. Every reply ends with the
#: fence it was sent with. A replay reads the hash and its TTL and nothing else: the clock
#: is read only where a lease is judged or set. A completed record answers with what its
#: tag binds (fingerprint, fence, tag) before any fingerprint is compared: it is
#: authenticated before any answer, a mismatch included.
CLAIM = (
    """
local rec = redis.call('HMGET', KEYS[1], 'state', 'fp', 'lease', 'status', 'headers', 'body',
  'rp', 'rd', 'fence', 'to', 'mac', 'rf')
local released = false
if rec[1] == 'r' then
  -- a released key's tombstone: absent; only its fence goes on into the new record
  released = rec[12]
  redis.call('DEL', KEYS[1])
  rec[1] = false
end
if rec[1] then
  if rec[1] == 'c' then
    return {'completed', rec[4], rec[5], rec[6], redis.call('PTTL', KEYS[1]), rec[2] or '',
      rec[9] or '', rec[11] or '', ARGV[2]}
  end
  if rec[2] ~= ARGV[1] then return {'mismatch', rec[2] or '', ARGV[2]} end
  if rec[9] == ARGV[2] then
    -- this claim, sent again after its reply was lost
    return {'claimed', rec[7] or '', rec[8] or '', rec[10] or '', ARGV[2]}
  end
end
"""
    + _NOW
    + """
if rec[1] then
  local lease = tonumber(rec[3]) or 0
  if lease > now then
    return {'in_progress', tostring(lease - now), rec[7] or '', rec[8] or '', ARGV[2]}
  end
  redis.call('HSET', KEYS[1], 'fence', ARGV[2], 'lease', tostring(now + tonumber(ARGV[3])),
    'to', '1')
  return {'claimed', rec[7] or '', rec[8] or '', '1', ARGV[2]}
end
redis.call('HSET', KEYS[1], 'state', 'p', 'fp', ARGV[1], 'fence', ARGV[2],
  'lease', tostring(now + tonumber(ARGV[3])), 'method', ARGV[5], 'route', ARGV[6],
  'created', tostring(now))
if released then redis.call('HSET', KEYS[1], 'rf', released) end
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return {'claimed', '', '', '', ARGV[2]}
"""
)

#: ARGV: a token echoed back last. The fields of ``LOOKUP_FIELDS``, the TTL, the token.
LOOKUP = """
local r = redis.call('HMGET', KEYS[1], 'state', 'fp', 'lease', 'status', 'headers', 'body',
  'rp', 'rd', 'fence', 'mac')
r[11] = redis.call('PTTL', KEYS[1])
r[12] = ARGV[1]
return r
"""

#: ARGV: fence, status, headers, body, ttl ms, tag. A record this fence already completed (the
#: same completion sent again after its reply was lost) answers 1 too. No clock and no
#: ``HDEL``: the lease is emptied in the same ``HSET``. The fenced scripts answer ``{1 or
#: 0, fence}``.
COMPLETE = """
local r = redis.call('HMGET', KEYS[1], 'state', 'fence')
if r[2] ~= ARGV[1] then return {0, ARGV[1]} end
if r[1] == 'c' then return {1, ARGV[1]} end
if r[1] ~= 'p' then return {0, ARGV[1]} end
redis.call('HSET', KEYS[1], 'state', 'c', 'status', ARGV[2], 'headers', ARGV[3], 'body', ARGV[4],
  'lease', '', 'mac', ARGV[6])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return {1, ARGV[1]}
"""

#: ARGV: fence, the tombstone's ms. A record with a recovery point stays (its lease ended)
#: for the next claimant to resume from; any other becomes a tombstone. Either keeps the
#: fence in ``rf``: the same release sent again after its reply was lost answers 1, even
#: once another claimant has taken the key (a claim carries a tombstone's ``rf`` over).
RELEASE = (
    _NOW
    + """
local r = redis.call('HMGET', KEYS[1], 'state', 'fence', 'rp', 'rf')
if r[1] ~= 'p' or r[2] ~= ARGV[1] then
  return {r[4] == ARGV[1] and 1 or 0, ARGV[1]}
end
if r[3] and r[3] ~= '' then
  redis.call('HSET', KEYS[1], 'lease', tostring(now), 'rf', ARGV[1])
else
  redis.call('DEL', KEYS[1])
  redis.call('HSET', KEYS[1], 'state', 'r', 'rf', ARGV[1])
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return {1, ARGV[1]}
"""
)

EXTEND = (
    _NOW
    + """
local r = redis.call('HMGET', KEYS[1], 'state', 'fence')
if r[1] ~= 'p' or r[2] ~= ARGV[1] then return {0, ARGV[1]} end
redis.call('HSET', KEYS[1], 'lease', tostring(now + tonumber(ARGV[2])))
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return {1, ARGV[1]}
"""
)

SAVE_RECOVERY_POINT = """
local r = redis.call('HMGET', KEYS[1], 'state', 'fence')
if r[1] ~= 'p' or r[2] ~= ARGV[1] then return {0, ARGV[1]} end
redis.call('HSET', KEYS[1], 'rp', ARGV[2], 'rd', ARGV[3])
return {1, ARGV[1]}
"""

#: Count one new record of a scope in its window: the counter expires with the window.
#: Not fenced: a count whose reply was lost and that redis-py sends again counts twice, so
#: the scope reaches ``MAX_NEW_RECORDS`` one record early (never late).
COUNT_NEW_RECORD = """
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return n
"""

#: An operator's delete: 1 when a record was there (a tombstone is absent).
DELETE = """
local state = redis.call('HGET', KEYS[1], 'state')
redis.call('DEL', KEYS[1])
if state and state ~= 'r' then return 1 end
return 0
"""

SCRIPTS = {
    "claim": CLAIM,
    "lookup": LOOKUP,
    "complete": COMPLETE,
    "release": RELEASE,
    "extend": EXTEND,
    "recovery": SAVE_RECOVERY_POINT,
    "quota": COUNT_NEW_RECORD,
    "delete": DELETE,
}
#: The SHA1 Redis names each script by (``EVALSHA``), for the async client.
SHAS = {name: hashlib.sha1(source.encode()).hexdigest() for name, source in SCRIPTS.items()}  # noqa: S324


# -- the records' encoding


def as_text(value: Any) -> str:
    if value is None:
        return ""
    return value.decode() if isinstance(value, bytes) else str(value)


def _expires(ttl_ms: int) -> float | None:
    """When a record with ``ttl_ms`` left expires, on this process' clock (``PTTL``'s
    -1, no expiry, is None)."""
    return now_ms() / 1000 + ttl_ms / 1000 if ttl_ms > 0 else None


def _data(value: Any) -> Any:
    text = as_text(value)
    return json.loads(text) if text else None


def _no_script() -> type[Exception]:
    """redis-py's ``NoScriptError`` (an ``except`` clause evaluates this only once an
    exception is raised: the import costs nothing on a command that succeeds, where an
    import statement runs the import machinery on every call)."""
    from redis.exceptions import NoScriptError

    return NoScriptError


def _refused() -> type[Exception]:
    """redis-py's ``ConnectionError``, as :func:`_no_script`."""
    from redis.exceptions import ConnectionError as RedisConnectionError

    return RedisConnectionError


def _echoed(reply: Sequence[Any], token: int) -> Sequence[Any]:
    """``reply`` less its echoed token, once that is ``token``; else the connection is out
    of step with its replies, and the redis-py ``ConnectionError`` raised (an outage:
    503) says so."""
    if not isinstance(reply, list) or not reply or as_text(reply[-1]) != str(token):
        from redis.exceptions import ConnectionError as RedisConnectionError

        raise RedisConnectionError("a Redis reply meant for another command was refused")
    return reply[:-1]


#: Where each script's token (echoed last in its reply) is among its arguments.
_TOKEN_AT = {"claim": 1, "lookup": 0, "complete": 0, "release": 0, "extend": 0, "recovery": 0}


def _answers(name: str, reply: Any, args: list[Any]) -> bool:
    """Whether ``reply`` carries the token script ``name`` was sent with (``quota``
    carries none)."""
    at = _TOKEN_AT.get(name)
    if at is None:
        return True
    return isinstance(reply, list) and bool(reply) and as_text(reply[-1]) == str(args[at])


def _fenced(reply: Any, fence: int) -> bool:
    """The answer of a fenced script (complete, release, extend, recovery point)."""
    return bool(_echoed(reply, fence)[0])


def _completed(
    scope: str, key: str, fingerprint: str, fields: Sequence[Any], ttl_ms: int
) -> KeyState | None:
    """The state of a completed record's ``fp, fence, mac, status, headers, body``,
    authenticated first (:mod:`~idempotency.stores.records`): None once its
    authenticated expiry has passed."""
    fp, fence, tag, status, headers, body = fields
    kept = StoredResponse.from_parts(int(status), as_text(headers), body)
    authenticated = verify(
        "RedisStore",
        scope,
        key,
        tag=tag,
        fingerprint=as_text(fp),
        fence=as_text(fence),
        stored=kept,
    )
    expires = _expires(ttl_ms)
    expires = authenticated if expires is None else min(expires, authenticated)
    if expires <= now_ms() / 1000:
        return None
    if as_text(fp) != fingerprint:
        return KeyState(ClaimStatus.MISMATCH, fingerprint=as_text(fp))
    return KeyState(
        ClaimStatus.COMPLETED, response=kept._replace(body=unseal(kept.body)), expires_at=expires
    )


def key_state_from_reply(
    reply: Sequence[Any], fence: int, scope: str, key: str, fingerprint: str
) -> KeyState:
    """The :class:`KeyState` of a ``CLAIM`` script's reply; ``fence`` is the claim's. A
    completed record past its authenticated expiry, which Redis still keeps (its TTL
    was lengthened), is answered as in progress until Redis drops it."""
    reply = _echoed(reply, fence)
    status = as_text(reply[0])
    if status == "claimed":
        return KeyState(
            ClaimStatus.CLAIMED,
            fence=fence,
            recovery_point=as_text(reply[1]),
            recovery_data=_data(reply[2]),
            taken_over=as_text(reply[3]) == "1",
        )
    if status == "completed":
        fields = [reply[5], reply[6], reply[7], reply[1], reply[2], reply[3]]
        found = _completed(scope, key, fingerprint, fields, int(reply[4]))
        return KeyState(ClaimStatus.IN_PROGRESS, retry_after=1.0) if found is None else found
    if status == "in_progress":
        return KeyState(
            ClaimStatus.IN_PROGRESS,
            retry_after=int(reply[1]) / 1000,
            recovery_point=as_text(reply[2]),
            recovery_data=_data(reply[3]),
        )
    return KeyState(ClaimStatus.MISMATCH, fingerprint=as_text(reply[1]) if len(reply) > 1 else "")


def key_state_from_lookup(
    reply: Sequence[Any], token: int, scope: str, key: str, fingerprint: str
) -> KeyState | None:
    """The :class:`KeyState` of a ``LOOKUP`` script's reply (None: absent)."""
    echoed = _echoed(reply, token)
    state, fp, lease, status, headers, body, point, data, fence, tag, remaining = echoed
    if state is None or as_text(state) == "r":  # absent, or a released key's tombstone
        return None
    if as_text(state) == "c":
        found = [fp, fence, tag, status, headers, body]
        return _completed(scope, key, fingerprint, found, int(remaining))
    if as_text(fp) != fingerprint:
        return KeyState(ClaimStatus.MISMATCH, fingerprint=as_text(fp))
    left = (int(lease or 0) - now_ms()) / 1000
    return KeyState(
        ClaimStatus.IN_PROGRESS,
        retry_after=max(0.0, left),
        recovery_point=as_text(point),
        recovery_data=_data(data),
    )


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


def claim_args(
    fingerprint: str, fence: int, lease: float, ttl: float, method: str, route: str
) -> list[Any]:
    return [fingerprint, fence, int(lease * 1000), _ms(ttl), method, route]


def complete_args(
    scope: str, key: str, fingerprint: str, fence: int, response: StoredResponse, ttl: float
) -> list[Any]:
    stored = response._replace(body=seal(response.body))
    tag = sign(scope, key, fingerprint=fingerprint, fence=fence, stored=stored, ttl=ttl)
    return [fence, stored.status, stored.headers_json(), stored.body, _ms(ttl), tag]


def recovery_args(fence: int, name: str, data: Any) -> list[Any]:
    return [fence, name, json.dumps(data) if data is not None else ""]


class RedisStore(RedisBackend, BaseStore):
    """Records in Redis through redis-py's public API (lease mode only).

    Needs the ``redis`` extra (redis-py and hiredis). Give it exactly one of:

    Args:
        location: A ``redis://``, ``rediss://`` or ``unix://`` URL of the primary (of any
            node, with ``cluster=True``).
        cache: The alias of a ``CACHES`` entry whose backend is Django's own
            ``django.core.cache.backends.redis.RedisCache`` or django-redis'
            ``django_redis.cache.RedisCache``; the store builds its own client with that
            cache's connection settings (its first ``LOCATION``: the primary).

    and any of these keyword options:

    Args:
        wait_replicas: Replicas that must acknowledge each claim, completion and
            recovery point (``WAIT``) before it counts (default 0: none).
        wait_timeout: Longest ``WAIT`` for them in seconds (default 0.5); a claim not
            replicated in time is released and answered ``503
            idempotency-store-not-durable``.
        key_prefix: Prefix of the store's keys.
        reconnect_window: Seconds a command keeps being sent again while the server
            refuses connections (a restart, an AOF being loaded), default 3; the claim
            or completion then goes through with its own token instead of a 503.
        max_connections: The most connections open at once, per process (sync) and per
            event loop (async); a caller finding all busy waits up to ``pool_timeout``
            seconds (default 5) for one, then gets a 503.
        cluster: True for a Redis Cluster (redis-py's ``RedisCluster``, primaries only).
        pool_timeout, retries, socket_timeout, socket_connect_timeout, ssl_ca_certs:
            redis-py connection options (None: the cache's, else the defaults of
            :mod:`~idempotency.utils.redis_clients`).

    Turn on AOF persistence: a Redis that forgets its records lets completed keys run
    again (system check W007).
    """

    #: ``OPTIONS`` of a Redis store (:mod:`idempotency.utils.backends`).
    options: ClassVar[Mapping[str, Setting]] = {
        "cache": REDIS_CACHE,
        **CLIENT_OPTIONS,
        "wait_replicas": Setting(
            0,
            "Replicas that must acknowledge each claim, completion and recovery point "
            "(WAIT numreplicas timeout) before it counts; 0 waits for none.",
            "integer",
            inclusive=True,
        ),
        "wait_timeout": Setting(
            0.5,
            "Seconds WAIT may block for those replicas; a claim not replicated in time is "
            "released and answered with 503.",
            "seconds",
        ),
        "reconnect_window": Setting(
            RECONNECT_WINDOW,
            "Seconds a command keeps being sent again while Redis refuses connections.",
            "seconds",
            inclusive=True,
        ),
        "key_prefix": KEY_PREFIX,
    }

    def __init__(
        self,
        location: str | None = None,
        *,
        wait_replicas: int = 0,
        wait_timeout: float = 0.5,
        reconnect_window: float = RECONNECT_WINDOW,
        **connection: Any,
    ) -> None:
        # location, cache, the client options and key_prefix: RedisBackend's
        super().__init__(location, **connection)
        self.wait_replicas = wait_replicas
        self.wait_timeout = wait_timeout
        self.reconnect_window = reconnect_window

    @property
    def alias(self) -> str | None:
        """The cache whose connection settings the store uses (None: a URL)."""
        return self.connector.cache

    def record_key(self, scope: str, key: str) -> str:
        return f"{self.key_prefix}:{{{record_digest(scope, key)}}}:rec"

    def _quota_counter(self, scope: str, window: float) -> tuple[str, float]:
        """The counter of ``scope``'s current window and the seconds left of the window."""
        start, left = quota_window(window, now_ms() / 1000)
        return f"{self.key_prefix}:{{{record_digest(scope, '')}}}:quota:{start}", left

    # -- running scripts, sync

    def _until_back(self, call: Callable[[], T]) -> T:
        """``call()``, again after growing pauses while the server refuses connections
        (restarting, loading its AOF), for up to ``reconnect_window`` seconds: the same
        command with the same token, which a resend recognises. A timeout is not retried
        here (redis-py's ``retries`` are)."""
        backoff: Backoff | None = None
        while True:
            try:
                return call()
            except _refused():
                backoff = backoff or Backoff(self.reconnect_window, cap=0.25, jitter=True)
                if not backoff.pause():
                    raise

    async def _auntil_back(self, call: Callable[[], Awaitable[T]]) -> T:
        """:meth:`_until_back`, awaited."""
        backoff: Backoff | None = None
        while True:
            try:
                return await call()
            except _refused():
                backoff = backoff or Backoff(self.reconnect_window, cap=0.25, jitter=True)
                if not await backoff.apause():
                    raise

    def _eval(self, name: str, key: str, args: list[Any]) -> Any:
        """Script ``name`` on ``key`` (``EVALSHA``; loaded again after ``NOSCRIPT``)."""
        return self._until_back(lambda: self._eval_once(name, key, args))

    def _eval_once(self, name: str, key: str, args: list[Any]) -> Any:
        reply = self._evalsha(name, key, args)
        if not _answers(name, reply, args):
            # a reply meant for another command was read: the pool drops a connection
            # with bytes left unread, so once more (a resend recognises its own token)
            reply = self._evalsha(name, key, args)
        return reply

    def _evalsha(self, name: str, key: str, args: list[Any]) -> Any:
        # the client's evalsha by the script's SHA, not a registered Script: its call
        # imports two modules and copies the arguments once more on every command
        client = self.client
        try:
            return client.evalsha(SHAS[name], 1, key, *args)
        except _no_script():  # a restarted or flushed server
            client.script_load(SCRIPTS[name])
            return client.evalsha(SHAS[name], 1, key, *args)

    def _run(self, name: str, key: str, args: list[Any]) -> tuple[Any, int | None]:
        """Script ``name`` on ``key``; with ``wait_replicas``, then ``WAIT`` on the same
        connection. The reply, and how many replicas acknowledged (None without WAIT)."""
        if self.wait_replicas <= 0:
            return self._eval(name, key, args), None
        return self._until_back(lambda: self._run_once(name, key, args))

    def _run_once(self, name: str, key: str, args: list[Any]) -> tuple[Any, int | None]:
        if not self.connector.is_cluster():
            return self._run_on(self.client, name, key, args)
        from redis.exceptions import ConnectionError as RedisConnectionError
        from redis.exceptions import MovedError

        try:
            return self._run_on(self._primary_of(key), name, key, args)
        except (MovedError, RedisConnectionError):
            # the slot moved or its primary is gone (a failover): a keyed command through
            # the cluster client follows the redirection or reads the cluster's slots
            # again, as redis-py does for its own commands; then once more on the
            # primary it names now (a resend recognises its own token)
            self.client.pttl(key)
            return self._run_on(self._primary_of(key), name, key, args)

    def _primary_of(self, key: str) -> Any:
        """RedisCluster: a cluster pipeline runs no scripts, so the script and its WAIT go
        to the primary of key's slot as one pipeline of that node's client."""
        client = self.client
        return client.get_redis_connection(client.get_node_from_key(key))

    def _run_on(self, client: Any, name: str, key: str, args: list[Any]) -> tuple[Any, int | None]:
        found = self._run_waiting(client, name, key, args)
        if not _answers(name, found[0], args):
            found = self._run_waiting(client, name, key, args)  # as in _eval
        return found

    def _run_waiting(
        self, client: Any, name: str, key: str, args: list[Any]
    ) -> tuple[Any, int | None]:
        # WAIT counts the writes of its own connection: one pipeline, one connection. The
        # script goes by its SHA: a Script queued on a pipeline makes it ask SCRIPT
        # EXISTS first, a round trip more on every claim and completion
        for attempt in range(2):
            with client.pipeline(transaction=False) as pipe:
                pipe.evalsha(SHAS[name], 1, key, *args)
                pipe.execute_command("WAIT", self.wait_replicas, _ms(self.wait_timeout))
                try:
                    reply, acknowledged = pipe.execute()
                except _no_script():
                    if attempt:
                        raise
                    client.script_load(SCRIPTS[name])
                    continue
            return reply, int(acknowledged)
        raise AssertionError("unreachable")  # pragma: no cover

    # -- running scripts, async

    def _async_client(self) -> Any:
        """The running loop's ``redis.asyncio`` client, or None on a Redis Cluster (the
        ``a*`` methods then run the sync ones in threads)."""
        if self.connector.is_cluster():
            return None
        return self.connector.async_client()

    async def _aeval(self, client: Any, name: str, key: str, args: list[Any]) -> Any:
        """:meth:`_eval` on the async ``client``."""
        return await self._auntil_back(lambda: self._aeval_once(client, name, key, args))

    async def _aeval_once(self, client: Any, name: str, key: str, args: list[Any]) -> Any:
        reply = await self._aevalsha(client, name, key, args)
        if not _answers(name, reply, args):
            reply = await self._aevalsha(client, name, key, args)
        return reply

    async def _aevalsha(self, client: Any, name: str, key: str, args: list[Any]) -> Any:
        try:
            return await client.evalsha(SHAS[name], 1, key, *args)
        except _no_script():  # a restarted or flushed server
            await client.script_load(SCRIPTS[name])
            return await client.evalsha(SHAS[name], 1, key, *args)

    async def _arun(
        self, client: Any, name: str, key: str, args: list[Any]
    ) -> tuple[Any, int | None]:
        """:meth:`_run` on the async ``client``."""
        if self.wait_replicas <= 0:
            return await self._aeval(client, name, key, args), None
        return await self._auntil_back(lambda: self._arun_once(client, name, key, args))

    async def _arun_once(
        self, client: Any, name: str, key: str, args: list[Any]
    ) -> tuple[Any, int | None]:
        found = await self._arun_waiting(client, name, key, args)
        if not _answers(name, found[0], args):
            found = await self._arun_waiting(client, name, key, args)
        return found

    async def _arun_waiting(
        self, client: Any, name: str, key: str, args: list[Any]
    ) -> tuple[Any, int]:
        for attempt in range(2):
            async with client.pipeline(transaction=False) as pipe:
                pipe.evalsha(SHAS[name], 1, key, *args)
                pipe.execute_command("WAIT", self.wait_replicas, _ms(self.wait_timeout))
                try:
                    reply, acknowledged = await pipe.execute()
                except _no_script():
                    if attempt:
                        raise
                    await client.script_load(SCRIPTS[name])
                    continue
            return reply, int(acknowledged)
        raise AssertionError("unreachable")  # pragma: no cover

    def _durable(self, acknowledged: int | None) -> bool:
        return acknowledged is None or acknowledged >= self.wait_replicas

    # -- the contract

    @store_operation("redis")
    def claim(
        self,
        scope: str,
        key: str,
        *,
        fingerprint: str,
        lease: float,
        ttl: float,
        method: str = "",
        route: str = "",
    ) -> KeyState:
        fence = new_fence()  # before the first send: a resend carries it too
        args = claim_args(fingerprint, fence, lease, ttl, method, route)
        reply, acknowledged = self._run("claim", self.record_key(scope, key), args)
        claim = key_state_from_reply(reply, fence, scope, key, fingerprint)
        if claim.owned and not self._durable(acknowledged):
            # not on enough replicas: a failover could lose it, so the work must not start
            self.release(scope, key, fence=fence)
            raise StoreNotDurable(replicas=self.wait_replicas, acknowledged=acknowledged)
        return claim

    @store_operation("redis")
    async def aclaim(
        self,
        scope: str,
        key: str,
        *,
        fingerprint: str,
        lease: float,
        ttl: float,
        method: str = "",
        route: str = "",
    ) -> KeyState:
        client = self._async_client()
        if client is None:
            return await super().aclaim(
                scope, key, fingerprint=fingerprint, lease=lease, ttl=ttl, method=method,
                route=route,
            )  # fmt: skip
        fence = new_fence()
        args = claim_args(fingerprint, fence, lease, ttl, method, route)
        reply, acknowledged = await self._arun(client, "claim", self.record_key(scope, key), args)
        claim = key_state_from_reply(reply, fence, scope, key, fingerprint)
        if claim.owned and not self._durable(acknowledged):
            await self.arelease(scope, key, fence=fence)
            raise StoreNotDurable(replicas=self.wait_replicas, acknowledged=acknowledged)
        return claim

    @store_operation("redis")
    def lookup(self, scope: str, key: str, *, fingerprint: str) -> KeyState | None:
        token = new_fence()
        reply = self._eval("lookup", self.record_key(scope, key), [token])
        return key_state_from_lookup(reply, token, scope, key, fingerprint)

    @store_operation("redis")
    async def alookup(self, scope: str, key: str, *, fingerprint: str) -> KeyState | None:
        client = self._async_client()
        if client is None:
            return await super().alookup(scope, key, fingerprint=fingerprint)
        token = new_fence()
        reply = await self._aeval(client, "lookup", self.record_key(scope, key), [token])
        return key_state_from_lookup(reply, token, scope, key, fingerprint)

    async def apeek(self, scope: str, key: str, *, fingerprint: str) -> KeyState | None:
        return await self.alookup(scope, key, fingerprint=fingerprint)

    @store_operation("redis")
    def complete(
        self,
        scope: str,
        key: str,
        *,
        fence: int,
        response: StoredResponse,
        ttl: float,
        fingerprint: str = "",
    ) -> bool:
        record = self.record_key(scope, key)
        if not fingerprint:  # a caller that did not say: the claim's, which the tag binds
            fingerprint = as_text(self._until_back(lambda: self.client.hget(record, "fp")))
        args = complete_args(scope, key, fingerprint, fence, response, ttl)
        done, acknowledged = self._run("complete", record, args)
        return self._completed(scope, key, _fenced(done, fence), acknowledged)

    @store_operation("redis")
    async def acomplete(
        self,
        scope: str,
        key: str,
        *,
        fence: int,
        response: StoredResponse,
        ttl: float,
        fingerprint: str = "",
    ) -> bool:
        client = self._async_client()
        if client is None:
            return await super().acomplete(
                scope, key, fence=fence, response=response, ttl=ttl, fingerprint=fingerprint
            )
        record = self.record_key(scope, key)
        if not fingerprint:  # a caller that did not say: the claim's, which the tag binds
            fingerprint = as_text(await self._auntil_back(lambda: client.hget(record, "fp")))
        args = complete_args(scope, key, fingerprint, fence, response, ttl)
        done, acknowledged = await self._arun(client, "complete", record, args)
        return self._completed(scope, key, _fenced(done, fence), acknowledged)

    def _completed(self, scope: str, key: str, done: bool, acknowledged: int | None) -> bool:
        if done and not self._durable(acknowledged):
            # the work is done and its answer goes out; only a failover in this window
            # could lose the stored response (the claim, replicated, then blocks retries
            # until its lease ends)
            logger.warning(
                "completion of %s reached %s of %s replicas within %s s",
                log_ref(scope, key),
                acknowledged,
                self.wait_replicas,
                self.wait_timeout,
            )
        return done

    @store_operation("redis")
    def release(self, scope: str, key: str, *, fence: int) -> bool:
        args = [fence, _ms(RELEASE_REMEMBERED)]
        return _fenced(self._eval("release", self.record_key(scope, key), args), fence)

    @store_operation("redis")
    async def arelease(self, scope: str, key: str, *, fence: int) -> bool:
        client = self._async_client()
        if client is None:
            return await super().arelease(scope, key, fence=fence)
        args = [fence, _ms(RELEASE_REMEMBERED)]
        reply = await self._aeval(client, "release", self.record_key(scope, key), args)
        return _fenced(reply, fence)

    @store_operation("redis")
    def extend(self, scope: str, key: str, *, fence: int, lease: float) -> bool:
        reply = self._eval("extend", self.record_key(scope, key), [fence, _ms(lease)])
        return _fenced(reply, fence)

    @store_operation("redis")
    async def aextend(self, scope: str, key: str, *, fence: int, lease: float) -> bool:
        client = self._async_client()
        if client is None:
            return await super().aextend(scope, key, fence=fence, lease=lease)
        args = [fence, _ms(lease)]
        return _fenced(
            await self._aeval(client, "extend", self.record_key(scope, key), args), fence
        )

    @store_operation("redis")
    def save_recovery_point(
        self, scope: str, key: str, *, fence: int, name: str, data: Any = None
    ) -> bool:
        args = recovery_args(fence, name, data)
        saved, acknowledged = self._run("recovery", self.record_key(scope, key), args)
        return self._saved(_fenced(saved, fence), acknowledged)

    @store_operation("redis")
    async def asave_recovery_point(
        self, scope: str, key: str, *, fence: int, name: str, data: Any = None
    ) -> bool:
        client = self._async_client()
        if client is None:
            return await super().asave_recovery_point(scope, key, fence=fence, name=name, data=data)
        args = recovery_args(fence, name, data)
        record = self.record_key(scope, key)
        saved, acknowledged = await self._arun(client, "recovery", record, args)
        return self._saved(_fenced(saved, fence), acknowledged)

    def _saved(self, saved: bool, acknowledged: int | None) -> bool:
        if saved and not self._durable(acknowledged):
            raise StoreNotDurable(replicas=self.wait_replicas, acknowledged=acknowledged)
        return saved

    @outage_raises_unavailable("redis")
    def count_new_record(self, scope: str, *, window: float) -> tuple[int, float]:
        """``INCR`` of the (scope, window) counter and its expiry, in one script."""
        name, left = self._quota_counter(scope, window)
        return int(self._eval("quota", name, [_ms(left)])), left

    @outage_raises_unavailable("redis")
    async def acount_new_record(self, scope: str, *, window: float) -> tuple[int, float]:
        client = self._async_client()
        if client is None:
            return await super().acount_new_record(scope, window=window)
        name, left = self._quota_counter(scope, window)
        return int(await self._aeval(client, "quota", name, [_ms(left)])), left

    @outage_raises_unavailable("redis")
    def delete(self, scope: str, key: str) -> bool:
        return bool(self._eval("delete", self.record_key(scope, key), []))

    @outage_raises_unavailable("redis")
    async def adelete(self, scope: str, key: str) -> bool:
        client = self._async_client()
        if client is None:
            return await super().adelete(scope, key)
        return bool(await self._aeval(client, "delete", self.record_key(scope, key), []))
