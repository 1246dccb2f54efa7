"""Counts the SQL statements of every request, server-side, into ``X-Bench-SQL``.

The load generator sums the header over all responses of a phase, so a phase's
statements per request are counted where they run, not guessed. Only statements
that go through Django's cursors are seen: BEGIN (implicit) and COMMIT are not.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import connection
from django.http import HttpRequest, HttpResponseBase

SQL_HEADER = "X-Bench-SQL"


class QueryCountMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        count = 0

        def counter(
            execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any
        ) -> Any:
            nonlocal count
            count += 1
            return execute(sql, params, many, context)

        with connection.execute_wrapper(counter):
            response = self.get_response(request)
        response[SQL_HEADER] = str(count)
        return response
