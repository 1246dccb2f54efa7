"""Our variants: the bare view's body under ``@idempotent``, one store and mode each."""

from __future__ import annotations

from typing import Any

from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from bench.benchapp.views import write_entry, write_entry_in_transaction
from idempotency import DatabaseStore, RedisStore, idempotent


def _variant(name: str, body: Any = write_entry, **options: Any) -> type[APIView]:
    class Write(APIView):
        @idempotent(**options)
        def post(self, request: Request) -> Response:
            return body(request)  # type: ignore[no-any-return]

    Write.__name__ = Write.__qualname__ = name
    return Write


DbAtomicWrite = _variant("DbAtomicWrite", store=DatabaseStore(), mode="atomic")
# the same body without its own atomic(): atomic mode's transaction is the only one, so
# the view's nested atomic() adds no SAVEPOINT / RELEASE (README, performance notes)
DbAtomicFlatWrite = _variant(
    "DbAtomicFlatWrite", body=write_entry_in_transaction, store=DatabaseStore(), mode="atomic"
)
# the opt-in insert-last claim: one statement less, but concurrent duplicates run the view
DbOptimisticWrite = _variant(
    "DbOptimisticWrite", store=DatabaseStore(), mode="atomic", claim="optimistic"
)
DbLeaseWrite = _variant("DbLeaseWrite", store=DatabaseStore(), mode="lease")
RedisWrite = _variant("RedisWrite", store=RedisStore(), mode="lease")
# DatabaseStore in atomic mode with completed responses cached in Redis (the "default"
# django-redis cache): replays read Redis, not PostgreSQL.
DbRedisCacheWrite = _variant(
    "DbRedisCacheWrite", store=DatabaseStore(response_cache="default"), mode="atomic"
)
