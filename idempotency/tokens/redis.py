"""Submit tokens on Redis (``idempotency.tokens.RedisTokens``): one Lua script consumes."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, ClassVar

from django.utils import timezone

from idempotency.conf import Setting
from idempotency.core.backends import KEY_PREFIX
from idempotency.core.outages import outage_raises_unavailable
from idempotency.core.redis_clients import RedisConnector
from idempotency.stores.redis_client import (
    CLIENT_OPTIONS,
    LOCATION_SCHEMES,
    REDIS_CACHE,
    client_kwargs,
)
from idempotency.tokens.base import TOMBSTONE_SECONDS, TokenBackend

REDIS_CONSUME = """
local bound = redis.call('GET', KEYS[1])
if bound then
  if bound ~= ARGV[1] then return 'invalid' end
  local keep = redis.call('PTTL', KEYS[1])
  if keep < tonumber(ARGV[2]) then keep = tonumber(ARGV[2]) end
  redis.call('DEL', KEYS[1])
  redis.call('SET', KEYS[2], bound, 'PX', keep)
  return 'ok'
end
if redis.call('GET', KEYS[2]) == ARGV[1] then return 'used' end
return 'invalid'
"""


class RedisTokens(TokenBackend):
    """Tokens as Redis strings; consumption is one compare-delete-and-tombstone script.

    Connects to its ``LOCATION`` (``redis://``, ``rediss://``, ``unix://``), or uses the
    connection of the django-redis cache its ``cache`` option names."""

    location_schemes: ClassVar[tuple[str, ...]] = LOCATION_SCHEMES
    #: ``OPTIONS`` of Redis tokens (:mod:`idempotency.core.backends`).
    options: ClassVar[Mapping[str, Setting]] = {
        "cache": REDIS_CACHE,
        **CLIENT_OPTIONS,
        "key_prefix": KEY_PREFIX,
    }

    def __init__(
        self,
        location: str | None = None,
        *,
        cache: str | None = None,
        max_connections: int | None = None,
        pool_timeout: float | None = None,
        retries: int | None = None,
        socket_timeout: float | None = None,
        socket_connect_timeout: float | None = None,
        ssl_ca_certs: str | None = None,
        cluster: bool = False,
        key_prefix: str = KEY_PREFIX.default,
    ) -> None:
        self.location = location
        self.cache = cache
        self.key_prefix = key_prefix
        # neither: the cache "default"
        self.connector = RedisConnector(
            location,
            cache=cache or ("default" if location is None else None),
            user="RedisTokens",
            **client_kwargs(
                max_connections=max_connections,
                pool_timeout=pool_timeout,
                retries=retries,
                socket_timeout=socket_timeout,
                socket_connect_timeout=socket_connect_timeout,
                ssl_ca_certs=ssl_ca_certs,
                cluster=cluster,
            ),
        )

    @property
    def client(self) -> Any:
        """The sync redis-py client (:class:`~idempotency.core.redis_clients.RedisConnector`)."""
        return self.connector.client

    def keys(self, token_hash: str) -> tuple[str, str]:
        # one hash tag: the token and its tombstone live on one Redis Cluster slot
        base = f"{self.key_prefix}:st:{{{token_hash}}}"
        return base, f"{base}:used"

    @staticmethod
    def binding(scope: str, purpose: str) -> str:
        return json.dumps([scope, purpose], separators=(",", ":"))

    @outage_raises_unavailable("redis", keyed=False)
    def issue(self, token_hash: str, scope: str, purpose: str, ttl: float) -> datetime:
        expires_at = timezone.now() + timedelta(seconds=ttl)
        key, _tombstone = self.keys(token_hash)
        self.client.set(key, self.binding(scope, purpose), px=max(1, int(ttl * 1000)), nx=True)
        return expires_at

    @outage_raises_unavailable("redis", keyed=False)
    def consume(self, token_hash: str, scope: str, purpose: str) -> str:
        client = self.client
        reply = client.register_script(REDIS_CONSUME)(
            keys=list(self.keys(token_hash)),
            args=[self.binding(scope, purpose), TOMBSTONE_SECONDS * 1000],
        )
        return reply.decode() if isinstance(reply, bytes) else str(reply)
