"""Locks on Redis (``idempotency.locks.RedisLockBackend``): a key with a random owner token."""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

from idempotency.locks.base import Holding, LockBackend
from idempotency.utils.outages import outage_raises_unavailable
from idempotency.utils.redis_clients import RedisBackend

REDIS_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

#: ARGV[1] owner token, ARGV[2] milliseconds, ARGV[3] '1' to replace the TTL.
REDIS_EXTEND = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local add = tonumber(ARGV[2])
local ttl = redis.call('PTTL', KEYS[1])
if ARGV[3] == '1' or ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], add)
else
  redis.call('PEXPIRE', KEYS[1], ttl + add)
end
return 1
"""


class RedisHolding(Holding):
    def __init__(self, client: Any, key: str, timeout: float | None) -> None:
        self.client = client
        self.key = key
        self.timeout = timeout
        self.token = secrets.token_hex(16)

    @outage_raises_unavailable("redis", keyed=False)
    def try_acquire(self) -> bool:
        if self.timeout is None:
            return bool(self.client.set(self.key, self.token, nx=True))
        px = max(1, int(self.timeout * 1000))
        return bool(self.client.set(self.key, self.token, nx=True, px=px))

    @outage_raises_unavailable("redis", keyed=False)
    def release(self) -> bool:
        return bool(self.client.register_script(REDIS_RELEASE)(keys=[self.key], args=[self.token]))

    @outage_raises_unavailable("redis", keyed=False)
    def extend(self, additional: float, *, replace_ttl: bool = False) -> bool:
        extended = self.client.register_script(REDIS_EXTEND)(
            keys=[self.key],
            args=[self.token, max(1, int(additional * 1000)), "1" if replace_ttl else "0"],
        )
        return bool(extended)

    @outage_raises_unavailable("redis", keyed=False)
    def owned(self) -> bool:
        value = self.client.get(self.key)
        if isinstance(value, bytes):
            value = value.decode()
        return bool(value == self.token)


class RedisLockBackend(RedisBackend, LockBackend):
    """Locks as Redis keys at its ``LOCATION`` (``redis://``, ``rediss://``, ``unix://``),
    or on the connection of the django-redis cache its ``cache`` option names."""

    def key(self, name: str) -> str:
        digest = hashlib.sha256(name.encode()).hexdigest()[:40]
        return f"{self.key_prefix}:lock:{{{digest}}}"

    def holding(self, name: str, timeout: float | None) -> Holding:
        return RedisHolding(self.client, self.key(name), timeout)
