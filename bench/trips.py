"""The time a request spends inside its round trips, measured as it runs.

:class:`TripTimer` wraps the three places where a request hands work to a server and
waits for the answer, for as long as it is active:

* a SQL statement through Django's cursor (``connection.execute_wrapper``: Django's
  wrappers, psycopg's ``execute`` with its adaptation of the parameters, the server's
  work and the result's transfer; ``SAVEPOINT``/``RELEASE`` included);
* the end of a transaction (``connection._commit``/``_rollback``: the server's
  ``COMMIT`` with its WAL flush when the commit is durable);
* a Redis command (``redis.Redis.execute_command``: redis-py's packing, the connection
  pool, the server's work and the reply's parsing; a script's ``EVALSHA`` included), and
  a pipeline (``redis.client.Pipeline.execute``: a script and its ``WAIT``).

Each interval is added to the wall clock (``time.perf_counter``) and the request
thread's CPU clock (``time.thread_time``) of the current request. What the request
spends *outside* them is the rest: the layer's Python, Django's and DRF's, the view's.
The price of a round trip is then what that very round trip cost, with its driver and
its server work, rather than a ``SELECT 1`` standing in for an ``INSERT`` and a durable
``COMMIT``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any


@dataclass
class InTrips:
    """Seconds spent inside round trips since the last :meth:`reset`."""

    wall: float = 0.0
    cpu: float = 0.0

    def reset(self) -> None:
        self.wall = self.cpu = 0.0


@contextmanager
def trip_timer() -> Iterator[InTrips]:
    """Time every round trip made while active; the running totals."""
    import redis
    from django.db import connection
    from redis.client import Pipeline

    spent = InTrips()
    depth = [0]  # a command inside a command (a script through execute_command) counts once

    def timed(func: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if depth[0]:
                return func(*args, **kwargs)
            depth[0] += 1
            wall, cpu = time.perf_counter(), time.thread_time()
            try:
                return func(*args, **kwargs)
            finally:
                spent.cpu += time.thread_time() - cpu
                spent.wall += time.perf_counter() - wall
                depth[0] -= 1

        return wrapper

    def sql(execute: Callable[..., object], *args: object) -> object:
        return timed(execute)(*args)

    client = redis.Redis
    execute_command = client.execute_command
    client.execute_command = timed(execute_command)  # type: ignore[method-assign]
    pipeline_execute = Pipeline.execute
    Pipeline.execute = timed(pipeline_execute)  # type: ignore[method-assign]
    connection._commit = timed(connection._commit)  # type: ignore[method-assign]
    connection._rollback = timed(connection._rollback)  # type: ignore[method-assign]
    try:
        with connection.execute_wrapper(sql):
            yield spent
    finally:
        client.execute_command = execute_command  # type: ignore[method-assign]
        Pipeline.execute = pipeline_execute  # type: ignore[method-assign]
        del connection._commit, connection._rollback
