"""RedisStore: records as Redis hashes, every transition one Lua script.

Uses the connection of a django-redis cache (``REDIS_ALIAS``). A record lives
under ``<prefix>:{<digest>}:rec``; the digest sits in a hash tag so the record
and anything kept beside it land on one Redis Cluster slot. Expiry is Redis's
own key TTL, so an expired record is absent the moment its TTL passes. Lease
times are taken from the Redis server's clock (``TIME``), never the caller's.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from idempotency.conf import idempotency_settings
from idempotency.outages import guard
from idempotency.responses import StoredResponse
from idempotency.stores import record_digest
from idempotency.stores.base import BaseStore, Claim, ClaimStatus, new_fence, now_ms

_NOW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
"""

CLAIM = (
    _NOW
    + """
local rec = redis.call('HMGET', KEYS[1], 'state', 'fp', 'lease', 'status', 'headers', 'body',
  'rp', 'rd')
if rec[1] then
  if rec[2] ~= ARGV[1] then return {'mismatch'} end
  if rec[1] == 'c' then return {'completed', rec[4], rec[5], rec[6]} end
  local lease = tonumber(rec[3]) or 0
  if lease > now then return {'in_progress', tostring(lease - now), rec[7] or '', rec[8] or ''} end
  redis.call('HSET', KEYS[1], 'fence', ARGV[2], 'lease', tostring(now + tonumber(ARGV[3])))
  return {'claimed', rec[7] or '', rec[8] or '', 'takeover'}
end
redis.call('HSET', KEYS[1], 'state', 'p', 'fp', ARGV[1], 'fence', ARGV[2],
  'lease', tostring(now + tonumber(ARGV[3])), 'method', ARGV[5], 'route', ARGV[6],
  'created', tostring(now))
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return {'claimed', '', ''}
"""
)

COMPLETE = (
    _NOW
    + """
local r = redis.call('HMGET', KEYS[1], 'state', 'fence')
if r[1] ~= 'p' or r[2] ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'state', 'c', 'status', ARGV[2], 'headers', ARGV[3], 'body', ARGV[4],
  'completed', tostring(now))
redis.call('HDEL', KEYS[1], 'lease')
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return 1
"""
)

RELEASE = (
    _NOW
    + """
local r = redis.call('HMGET', KEYS[1], 'state', 'fence', 'rp')
if r[1] ~= 'p' or r[2] ~= ARGV[1] then return 0 end
if r[3] and r[3] ~= '' then
  redis.call('HSET', KEYS[1], 'lease', tostring(now))
else
  redis.call('DEL', KEYS[1])
end
return 1
"""
)

SAVE_RECOVERY_POINT = """
local r = redis.call('HMGET', KEYS[1], 'state', 'fence')
if r[1] ~= 'p' or r[2] ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'rp', ARGV[2], 'rd', ARGV[3])
return 1
"""


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value.decode() if isinstance(value, bytes) else str(value)


def _data(value: Any) -> Any:
    text = _text(value)
    return json.loads(text) if text else None


class RedisStore(BaseStore):
    """Atomic claim, completion and release on Redis (lease mode only)."""

    supports_atomic: ClassVar[bool] = False

    def __init__(self, alias: str | None = None) -> None:
        self._alias = alias
        self._client: Any = None
        self._scripts: dict[str, Any] = {}

    @property
    def client(self) -> Any:
        if self._client is None:
            from django_redis import get_redis_connection

            self._client = get_redis_connection(self._alias or idempotency_settings.REDIS_ALIAS)
        return self._client

    def _script(self, name: str, source: str) -> Any:
        script = self._scripts.get(name)
        if script is None:
            script = self.client.register_script(source)
            self._scripts[name] = script
        return script

    def record_key(self, scope: str, key: str) -> str:
        return f"{idempotency_settings.KEY_PREFIX}:{{{record_digest(scope, key)}}}:rec"

    @guard("redis")
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
    ) -> Claim:
        fence = new_fence()
        reply = self._script("claim", CLAIM)(
            keys=[self.record_key(scope, key)],
            args=[fingerprint, fence, int(lease * 1000), max(1, int(ttl * 1000)), method, route],
        )
        return self._claim_from_reply(reply, fence)

    def _claim_from_reply(self, reply: list[Any], fence: int) -> Claim:
        status = _text(reply[0])
        if status == "claimed":
            return Claim(
                ClaimStatus.CLAIMED,
                fence=fence,
                recovery_point=_text(reply[1]),
                recovery_data=_data(reply[2]),
                taken_over=len(reply) > 3,
            )
        if status == "completed":
            return Claim(
                ClaimStatus.COMPLETED,
                response=StoredResponse.from_parts(int(reply[1]), _text(reply[2]), reply[3]),
            )
        if status == "in_progress":
            return Claim(
                ClaimStatus.IN_PROGRESS,
                retry_after=int(reply[1]) / 1000,
                recovery_point=_text(reply[2]),
                recovery_data=_data(reply[3]),
            )
        return Claim(ClaimStatus.MISMATCH)

    @guard("redis")
    def lookup(self, scope: str, key: str, *, fingerprint: str) -> Claim | None:
        state, fp, lease, status, headers, body, point, data = self.client.hmget(
            self.record_key(scope, key),
            ["state", "fp", "lease", "status", "headers", "body", "rp", "rd"],
        )
        if state is None:
            return None
        if _text(fp) != fingerprint:
            return Claim(ClaimStatus.MISMATCH)
        if _text(state) == "c":
            return Claim(
                ClaimStatus.COMPLETED,
                response=StoredResponse.from_parts(int(status), _text(headers), body),
            )
        remaining = (int(lease or 0) - now_ms()) / 1000
        return Claim(
            ClaimStatus.IN_PROGRESS,
            retry_after=max(0.0, remaining),
            recovery_point=_text(point),
            recovery_data=_data(data),
        )

    @guard("redis")
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
        done = self._script("complete", COMPLETE)(
            keys=[self.record_key(scope, key)],
            args=[
                fence,
                response.status,
                response.headers_json(),
                response.body,
                max(1, int(ttl * 1000)),
            ],
        )
        return bool(done)

    @guard("redis")
    def release(self, scope: str, key: str, *, fence: int) -> bool:
        return bool(
            self._script("release", RELEASE)(keys=[self.record_key(scope, key)], args=[fence])
        )

    @guard("redis")
    def save_recovery_point(
        self, scope: str, key: str, *, fence: int, name: str, data: Any = None
    ) -> bool:
        saved = self._script("recovery", SAVE_RECOVERY_POINT)(
            keys=[self.record_key(scope, key)],
            args=[fence, name, json.dumps(data) if data is not None else ""],
        )
        return bool(saved)

    @guard("redis")
    def delete(self, scope: str, key: str) -> bool:
        return bool(self.client.delete(self.record_key(scope, key)))
