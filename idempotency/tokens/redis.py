"""Submit tokens on Redis (``idempotency.tokens.RedisTokens``): one Lua script consumes."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

from django.utils import timezone

from idempotency.tokens.base import TOMBSTONE_SECONDS, TokenBackend
from idempotency.utils.outages import outage_raises_unavailable
from idempotency.utils.redis_clients import RedisBackend

#: KEYS[1] token, KEYS[2] tombstone; ARGV[1] binding, ARGV[2] shortest tombstone (ms).
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


class RedisTokens(RedisBackend, TokenBackend):
    """Tokens as Redis strings; consumption is one compare-delete-and-tombstone script.

    Connects to its ``LOCATION`` (``redis://``, ``rediss://``, ``unix://``), or uses the
    connection of the django-redis cache its ``cache`` option names."""

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
