"""A retrying HTTP client that keeps one idempotency key per operation (extra ``client``).

``pip install "/path/to/django-idempotency[client]"`` (httpx and tenacity). It imports no Django,
so any Python process can use it::

    from idempotency.client import IdempotentClient, RetryPolicy

    with IdempotentClient("https://shop.example", headers={"Authorization": "Token ..."},
                          policy=RetryPolicy(deadline=30)) as client:
        answer = client.post("/api/orders/42/pay/", json={"pay_no": "p-42"})
        answer.status_code, answer.replayed, answer.json()

Each call is one logical operation with one key (a new UUID4, or ``key=``), sent on
every attempt. Retried: connection errors, timeouts, 5xx and ``409
idempotency-request-in-progress``, after the server's ``Retry-After`` or a capped,
jittered exponential backoff, until ``deadline``. Not retried: every other answer;
``422 idempotency-key-mismatch`` raises :class:`KeyMismatch`, ``400`` for the key
raises :class:`KeyRejected`. At the deadline: :class:`DeadlineExceeded`, whose
``may_have_happened`` says whether the operation can have run.
"""

from __future__ import annotations

from idempotency.client.clients import AsyncIdempotentClient, IdempotentClient
from idempotency.client.retries import (
    DEFAULT_HEADER,
    REPLAYED_HEADER,
    AnswerError,
    DeadlineExceeded,
    IdempotentClientError,
    IdempotentResponse,
    KeyMismatch,
    KeyRejected,
    RetryEvent,
    RetryPolicy,
    new_key,
    retry_after_seconds,
)

__all__ = [
    "DEFAULT_HEADER",
    "REPLAYED_HEADER",
    "AnswerError",
    "AsyncIdempotentClient",
    "DeadlineExceeded",
    "IdempotentClient",
    "IdempotentClientError",
    "IdempotentResponse",
    "KeyMismatch",
    "KeyRejected",
    "RetryEvent",
    "RetryPolicy",
    "new_key",
    "retry_after_seconds",
]
