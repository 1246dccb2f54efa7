"""The response cache (idempotency.checks.caches): W003."""

from __future__ import annotations

from tests.support.checks import LOCMEM, REDIS, ids, only


def test_w003_response_cache_on_locmem() -> None:
    only("W003", IDEMPOTENCY={"RESPONSE_CACHE": "default"}, CACHES=LOCMEM)
    assert ids(IDEMPOTENCY={"RESPONSE_CACHE": "default"}, CACHES=REDIS) == []
