"""Stand-ins that cost only round trips: the floor a layer of that many trips can reach.

Each is a reference endpoint (``bare`` or ``noop``) plus bare round trips and nothing
else: no fingerprint, no record, no replayed response. Run under the same load as the
variants (:mod:`bench.floor`), their ratios are what an idempotency layer that added
those trips and not one instruction more would score on this machine.

* ``noop-redis``: the no-op and one Redis ``GET`` of a 200-byte value (a replay from
  ``RedisStore`` or the response cache makes one Redis trip);
* ``noop-sql``: the no-op and one ``SELECT`` of a row by its primary key (a replay from
  ``DatabaseStore`` makes one statement);
* ``noop-eval``: the no-op and one ``EVALSHA`` of a script that only ``GET``s (what
  running a script costs beyond the command it runs);
* ``noop-store``: the no-op and ``RedisStore.claim`` meeting a completed record (the
  replay's very trip: the store's connection, its claim script, the reply decoded into
  a stored response), the rest of a replay left out (fingerprint, replayed response);
* ``noop-dbstore``: the no-op and ``DatabaseStore.lookup`` of a completed record (the
  database replay's one statement, its row decoded into a stored response);
* ``bare-redis2``: the write and two Redis ``GET`` (``RedisStore``'s claim and completion);
* ``bare-sql4``: the write and four ``SELECT`` (atomic mode's lookup, claim, the view's
  savepoint and the completion; reads where those write, so below the real price).
"""

from __future__ import annotations

import functools
from typing import Any

import redis
from django.db import connection, transaction
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from bench.benchapp.views import write_entry_in_transaction
from bench.env import REDIS_URL
from idempotency import DatabaseStore, RedisStore

#: The key every Redis trip reads; :func:`prepare` stores a value of a replay's size.
FLOOR_KEY = "bench:floor"


@functools.cache
def redis_client() -> Any:
    """One client per worker process, with its own connection pool, as a store has."""
    return redis.Redis.from_url(REDIS_URL)


#: A script that runs one command: what ``EVALSHA`` adds to it.
GET_SCRIPT = "return redis.call('GET', KEYS[1])"
#: The record ``noop-store`` claims: completed by :func:`prepare`.
STORE_SCOPE, STORE_KEY, STORE_FINGERPRINT = "bench:floor", "completed", "f" * 64


@functools.cache
def store() -> RedisStore:
    return RedisStore()


@functools.cache
def db_store() -> DatabaseStore:
    return DatabaseStore()


@functools.cache
def script() -> Any:
    return redis_client().register_script(GET_SCRIPT)


def prepare() -> None:
    """The value the trips read, and a completed record of a replay's size to claim."""
    from idempotency.stores.base import StoredResponse

    redis_client().set(FLOOR_KEY, b"x" * 200)
    claim = store().claim(
        STORE_SCOPE, STORE_KEY, fingerprint=STORE_FINGERPRINT, lease=30, ttl=86_400
    )
    response = StoredResponse(201, [("Content-Type", "application/json")], b"x" * 60)
    store().complete(STORE_SCOPE, STORE_KEY, fence=claim.fence, response=response, ttl=86_400)
    claim = db_store().claim(
        STORE_SCOPE, STORE_KEY, fingerprint=STORE_FINGERPRINT, lease=30, ttl=86_400
    )
    db_store().complete(STORE_SCOPE, STORE_KEY, fence=claim.fence, response=response, ttl=86_400)


def redis_trip() -> None:
    redis_client().get(FLOOR_KEY)


def sql_trip(request: Request) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT balance FROM benchapp_account WHERE user_id = %s", [request.user.pk])
        cursor.fetchone()


class NoopRedis(APIView):
    def post(self, request: Request) -> Response:
        redis_trip()
        return Response({"ok": True})


class NoopEval(APIView):
    def post(self, request: Request) -> Response:
        script()(keys=[FLOOR_KEY])
        return Response({"ok": True})


class NoopStore(APIView):
    def post(self, request: Request) -> Response:
        claim = store().claim(
            STORE_SCOPE, STORE_KEY, fingerprint=STORE_FINGERPRINT, lease=30, ttl=86_400
        )
        if claim.response is None:
            raise RuntimeError(f"the record was not completed: {claim}")
        return Response({"ok": True})


class NoopDbStore(APIView):
    def post(self, request: Request) -> Response:
        found = db_store().lookup(STORE_SCOPE, STORE_KEY, fingerprint=STORE_FINGERPRINT)
        if found is None or found.response is None:
            raise RuntimeError(f"the record was not completed: {found}")
        return Response({"ok": True})


class NoopSql(APIView):
    def post(self, request: Request) -> Response:
        sql_trip(request)
        return Response({"ok": True})


class BareRedis2(APIView):
    def post(self, request: Request) -> Response:
        redis_trip()
        with transaction.atomic():
            response = write_entry_in_transaction(request)
        redis_trip()
        return response


class BareSql4(APIView):
    def post(self, request: Request) -> Response:
        sql_trip(request)
        with transaction.atomic():
            sql_trip(request)
            sql_trip(request)
            response = write_entry_in_transaction(request)
            sql_trip(request)
        return response
