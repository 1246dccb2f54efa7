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

import email.utils
import json
import random
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NoReturn

import httpx
import tenacity

#: The header the key travels in unless the client is told another name.
DEFAULT_HEADER = "Idempotency-Key"
#: The header a server sets on an answer it replayed from its store.
REPLAYED_HEADER = "Idempotent-Replayed"
#: Methods that change state: they get a key. Safe methods are retried without one.
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})

IN_PROGRESS = "idempotency-request-in-progress"
MISMATCH = "idempotency-key-mismatch"
STORE_UNAVAILABLE = "idempotency-store-unavailable"
KEY_REFUSED = frozenset({"idempotency-key-invalid", "idempotency-key-required"})


def new_key() -> str:
    """A fresh key for one logical operation: a random UUID4."""
    return str(uuid.uuid4())


@dataclass(frozen=True)
class RetryPolicy:
    """How hard one logical operation is tried.

    ``deadline`` bounds everything: every attempt, every wait. Each attempt gets
    ``timeout`` (an ``httpx.Timeout`` or seconds), cut to what is left of the deadline.
    Without a ``Retry-After`` the waits grow ``backoff``, 2×, 4×, … up to
    ``max_backoff``, each drawn at random below that ("full jitter", so clients that
    failed together do not return together); with one, the wait is what the server
    asked for plus up to 10 %.
    """

    deadline: float = 30.0
    timeout: httpx.Timeout | float = field(default_factory=lambda: httpx.Timeout(10.0, connect=5.0))
    backoff: float = 0.25
    max_backoff: float = 8.0
    jitter: bool = True

    def __post_init__(self) -> None:
        if self.deadline <= 0 or self.backoff <= 0 or self.max_backoff < self.backoff:
            raise ValueError("deadline and backoff must be positive, max_backoff >= backoff")

    def pause(self, failures: int, retry_after: float | None) -> float:
        """The wait before the next attempt, after ``failures`` attempts in a row failed."""
        if retry_after is not None:
            return retry_after * (1 + random.uniform(0, 0.1) if self.jitter else 1)
        ceiling = min(self.max_backoff, self.backoff * 2 ** max(0, failures - 1))
        return random.uniform(0, ceiling) if self.jitter else ceiling

    def attempt_timeout(self, remaining: float) -> httpx.Timeout:
        """This attempt's timeouts: the policy's, none longer than ``remaining``."""
        base = (
            self.timeout if isinstance(self.timeout, httpx.Timeout) else httpx.Timeout(self.timeout)
        )
        remaining = max(remaining, 0.001)

        def cut(value: float | None) -> float:
            return remaining if value is None else min(value, remaining)

        return httpx.Timeout(
            connect=cut(base.connect),
            read=cut(base.read),
            write=cut(base.write),
            pool=cut(base.pool),
        )


def retry_after_seconds(response: httpx.Response, *, now: float | None = None) -> float | None:
    """``Retry-After`` in seconds (delta-seconds or an HTTP date), ``None`` if absent or bad."""
    value = response.headers.get("Retry-After", "").strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        current = datetime.now(UTC).timestamp() if now is None else now
        seconds = when.timestamp() - current
    if seconds != seconds or seconds == float("inf"):  # NaN, infinity
        return None
    return max(0.0, seconds)


def problem_code(response: httpx.Response) -> str | None:
    """The ``code`` of an RFC 9457 problem answer (or the last part of its ``type``)."""
    content_type = response.headers.get("Content-Type", "").split(";")[0].strip().lower()
    if not (content_type == "application/json" or content_type.endswith("+json")):
        return None
    try:
        body = json.loads(response.content)
    except ValueError:
        return None
    if not isinstance(body, dict):
        return None
    code = body.get("code")
    if isinstance(code, str):
        return code
    kind = body.get("type")
    return kind.rstrip("/").rsplit("/", 1)[-1] if isinstance(kind, str) else None


def is_in_progress(response: httpx.Response) -> bool:
    """A 409 saying another request with this key is still running (so: wait, retry)."""
    if response.status_code != 409:
        return False
    code = problem_code(response)
    return code == IN_PROGRESS or (code is None and "Retry-After" in response.headers)


def is_retryable_response(response: httpx.Response) -> bool:
    """5xx (the server failed, or its idempotency store did) and 409 in progress."""
    return response.status_code >= 500 or is_in_progress(response)


def is_retryable_error(exc: BaseException) -> bool:
    """Timeouts, refused or reset connections, a server that hung up mid-answer."""
    return isinstance(exc, httpx.TimeoutException | httpx.NetworkError | httpx.RemoteProtocolError)


def never_sent(exc: BaseException) -> bool:
    """Whether the request certainly never reached the server (no connection was made)."""
    return isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout)


def answer_means_not_run(response: httpx.Response) -> bool:
    """Answers by which the server says the operation did not run."""
    return response.status_code == 503 and problem_code(response) == STORE_UNAVAILABLE


class IdempotentClientError(Exception):
    """Base of the client's errors."""


class AnswerError(IdempotentClientError):
    """The server refused the key itself: retrying cannot help. ``response`` is its answer."""

    def __init__(self, message: str, response: httpx.Response, key: str | None) -> None:
        super().__init__(message)
        self.response = response
        self.key = key


class KeyMismatch(AnswerError):
    """422: this key was used before with a different request (another body or URL)."""


class KeyRejected(AnswerError):
    """400: the server refused the key (malformed, or required and missing)."""


class DeadlineExceeded(IdempotentClientError):
    """The operation got no final answer before its deadline.

    ``may_have_happened`` is False only when no attempt can have reached the server (none
    connected, or the server said it did not run it); then a new attempt is safe with any
    key. Otherwise retry later **with the same** ``key``: the server answers the first
    outcome, or runs it if it never did.
    """

    def __init__(
        self,
        *,
        method: str,
        url: str,
        key: str | None,
        attempts: int,
        elapsed: float,
        may_have_happened: bool,
        last_response: httpx.Response | None,
        last_error: BaseException | None,
        reason: str = "",
    ) -> None:
        self.method, self.url, self.key = method, url, key
        self.attempts, self.elapsed = attempts, elapsed
        self.may_have_happened = may_have_happened
        self.last_response, self.last_error = last_response, last_error
        last = (
            f"last answer {last_response.status_code}"
            if last_response is not None
            else f"last error {type(last_error).__name__}: {last_error}"
        )
        outcome = (
            "The operation MAY HAVE HAPPENED: an attempt reached the server without a final "
            f"answer. Retry later with the same key ({key}) to learn its outcome."
            if may_have_happened
            else "The operation did NOT happen: no attempt reached the server."
        )
        super().__init__(
            f"{method} {url}: no final answer after {attempts} attempt(s) in {elapsed:.1f} s "
            f"({last}{'; ' + reason if reason else ''}). {outcome}"
        )


@dataclass
class IdempotentResponse:
    """The final answer of one logical operation.

    ``replayed`` is the server's ``Idempotent-Replayed: true``: this answer is the stored
    one of an earlier attempt (its response was lost, or the operation ran before).
    """

    response: httpx.Response
    key: str | None
    attempts: int

    @property
    def replayed(self) -> bool:
        value: str = self.response.headers.get(REPLAYED_HEADER, "")
        return value.strip().lower() == "true"

    @property
    def status_code(self) -> int:
        return self.response.status_code

    @property
    def is_success(self) -> bool:
        return self.response.is_success

    @property
    def headers(self) -> httpx.Headers:
        return self.response.headers

    @property
    def content(self) -> bytes:
        return self.response.content

    def json(self) -> object:
        return self.response.json()

    def raise_for_status(self) -> IdempotentResponse:
        self.response.raise_for_status()
        return self


@dataclass(frozen=True)
class RetryEvent:
    """Told to ``on_retry`` before each wait: why the last attempt is being repeated."""

    key: str | None
    attempt: int
    wait: float
    status: int | None
    error: BaseException | None
    #: the server's ``Retry-After`` on the last answer, in seconds (None without one)
    retry_after: float | None = None


@dataclass
class Operation:
    """The state of one logical operation across its attempts."""

    method: str
    url: str
    key: str | None
    policy: RetryPolicy
    started: float = field(default_factory=time.monotonic)
    attempts: int = 0
    failures: int = 0
    reached: bool = False
    last_response: httpx.Response | None = None
    last_error: BaseException | None = None

    def remaining(self) -> float:
        return self.policy.deadline - (time.monotonic() - self.started)

    def begin(self) -> httpx.Timeout:
        self.attempts += 1
        return self.policy.attempt_timeout(self.remaining())

    def judge(self, response: httpx.Response) -> IdempotentResponse:
        """The final answer, or a raised error; retryable answers are kept for the wait."""
        self.last_response, self.last_error = response, None
        if is_retryable_response(response):
            self.failures += 1
            self.reached = self.reached or not answer_means_not_run(response)
            return IdempotentResponse(response, self.key, self.attempts)
        code = problem_code(response)
        if response.status_code == 422 and code == MISMATCH:
            raise KeyMismatch(
                f"{self.method} {self.url}: key {self.key} was used before for a different "
                "request; use a new key for a new operation",
                response,
                self.key,
            )
        if response.status_code == 400 and code in KEY_REFUSED:
            raise KeyRejected(
                f"{self.method} {self.url}: the server refused the key {self.key!r} ({code})",
                response,
                self.key,
            )
        return IdempotentResponse(response, self.key, self.attempts)

    def failed(self, exc: BaseException) -> None:
        self.last_response, self.last_error = None, exc
        self.failures += 1
        self.reached = self.reached or not never_sent(exc)

    def should_retry(self, result: IdempotentResponse | None, exc: BaseException | None) -> bool:
        if exc is not None:
            return is_retryable_error(exc)
        return result is not None and is_retryable_response(result.response)

    def pause(self) -> float:
        after = None if self.last_response is None else retry_after_seconds(self.last_response)
        return self.policy.pause(self.failures, after)

    def give_up(self, reason: str = "") -> DeadlineExceeded:
        return DeadlineExceeded(
            method=self.method,
            url=self.url,
            key=self.key,
            attempts=self.attempts,
            elapsed=time.monotonic() - self.started,
            may_have_happened=self.reached,
            last_response=self.last_response,
            last_error=self.last_error,
            reason=reason,
        )


#: An attempt needs at least this long (seconds) to be worth starting.
SHORTEST_ATTEMPT = 0.05

OnRetry = Callable[[RetryEvent], None]


class _Base:
    def __init__(self, policy: RetryPolicy | None, header: str, on_retry: OnRetry | None) -> None:
        self.policy = policy or RetryPolicy()
        self.header = header
        self.on_retry = on_retry

    def _operation(
        self, method: str, url: str, key: str | None, policy: RetryPolicy | None
    ) -> Operation:
        method = method.upper()
        if method in UNSAFE_METHODS:
            key = key or new_key()
        elif key is not None:
            raise ValueError(f"{method} is safe: it is retried without an idempotency key")
        return Operation(method=method, url=str(url), key=key, policy=policy or self.policy)

    def _headers(self, operation: Operation, headers: Mapping[str, str] | None) -> dict[str, str]:
        merged = dict(headers or {})
        if operation.key is not None:
            merged[self.header] = operation.key
        return merged

    def _retrying(self, operation: Operation) -> dict[str, Any]:
        """tenacity's arguments: what to retry, how long to wait, when to stop."""

        def retry(state: tenacity.RetryCallState) -> bool:
            outcome = state.outcome
            if outcome is None:
                return False
            if outcome.failed:
                return operation.should_retry(None, outcome.exception())
            return operation.should_retry(outcome.result(), None)

        def wait(state: tenacity.RetryCallState) -> float:
            return operation.pause()

        def stop(state: tenacity.RetryCallState) -> bool:
            return operation.remaining() - state.upcoming_sleep < SHORTEST_ATTEMPT

        def before_sleep(state: tenacity.RetryCallState) -> None:
            if self.on_retry is not None:
                last = operation.last_response
                self.on_retry(
                    RetryEvent(
                        key=operation.key,
                        attempt=operation.attempts,
                        wait=state.upcoming_sleep,
                        status=None if last is None else last.status_code,
                        error=operation.last_error,
                        retry_after=None if last is None else retry_after_seconds(last),
                    )
                )

        def give_up(state: tenacity.RetryCallState) -> NoReturn:
            wanted = state.upcoming_sleep
            reason = f"the next attempt was due in {wanted:.1f} s, past the deadline"
            raise operation.give_up(reason) from operation.last_error

        return {
            "retry": retry,
            "wait": wait,
            "stop": stop,
            "before_sleep": before_sleep,
            "retry_error_callback": give_up,
        }


class IdempotentClient(_Base):
    """A synchronous HTTP client whose unsafe requests are safe to retry, and are retried.

    ``client.post(url, json=...)`` is one logical operation: it gets one key (a new
    UUID4 unless ``key=`` is given), sent in ``header`` on every attempt, and is tried
    until a final answer or ``policy.deadline``. Other arguments go to ``httpx.Client``
    (``base_url``, ``headers``, ``auth``, ``transport``, ...), or pass your own ``client``.
    """

    def __init__(
        self,
        base_url: str = "",
        *,
        policy: RetryPolicy | None = None,
        header: str = DEFAULT_HEADER,
        on_retry: OnRetry | None = None,
        client: httpx.Client | None = None,
        **httpx_options: Any,
    ) -> None:
        super().__init__(policy, header, on_retry)
        self._owned = client is None
        self.http = client or httpx.Client(base_url=base_url, **httpx_options)

    def request(
        self,
        method: str,
        url: str,
        *,
        key: str | None = None,
        policy: RetryPolicy | None = None,
        headers: Mapping[str, str] | None = None,
        **options: Any,
    ) -> IdempotentResponse:
        """Send ``method url`` until a final answer; raise ``DeadlineExceeded`` at the deadline.

        ``options`` are ``httpx.Client.request``'s (``json``, ``content``, ``data``,
        ``params``, ...); ``timeout`` is the policy's, cut to the time left.
        """
        operation = self._operation(method, url, key, policy)
        sent_headers = self._headers(operation, headers)

        def attempt() -> IdempotentResponse:
            timeout = operation.begin()
            try:
                response = self.http.request(
                    operation.method, url, headers=sent_headers, timeout=timeout, **options
                )
            except httpx.TransportError as exc:
                operation.failed(exc)
                raise
            return operation.judge(response)

        result: IdempotentResponse = tenacity.Retrying(**self._retrying(operation))(attempt)
        return result

    def get(self, url: str, **options: Any) -> IdempotentResponse:
        return self.request("GET", url, **options)

    def post(self, url: str, **options: Any) -> IdempotentResponse:
        return self.request("POST", url, **options)

    def put(self, url: str, **options: Any) -> IdempotentResponse:
        return self.request("PUT", url, **options)

    def patch(self, url: str, **options: Any) -> IdempotentResponse:
        return self.request("PATCH", url, **options)

    def delete(self, url: str, **options: Any) -> IdempotentResponse:
        return self.request("DELETE", url, **options)

    def close(self) -> None:
        if self._owned:
            self.http.close()

    def __enter__(self) -> IdempotentClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncIdempotentClient(_Base):
    """:class:`IdempotentClient` for asyncio: the same rules, on ``httpx.AsyncClient``."""

    def __init__(
        self,
        base_url: str = "",
        *,
        policy: RetryPolicy | None = None,
        header: str = DEFAULT_HEADER,
        on_retry: OnRetry | None = None,
        client: httpx.AsyncClient | None = None,
        **httpx_options: Any,
    ) -> None:
        super().__init__(policy, header, on_retry)
        self._owned = client is None
        self.http = client or httpx.AsyncClient(base_url=base_url, **httpx_options)

    async def request(
        self,
        method: str,
        url: str,
        *,
        key: str | None = None,
        policy: RetryPolicy | None = None,
        headers: Mapping[str, str] | None = None,
        **options: Any,
    ) -> IdempotentResponse:
        """The async :meth:`IdempotentClient.request`."""
        operation = self._operation(method, url, key, policy)
        sent_headers = self._headers(operation, headers)

        async def attempt() -> IdempotentResponse:
            timeout = operation.begin()
            try:
                response = await self.http.request(
                    operation.method, url, headers=sent_headers, timeout=timeout, **options
                )
            except httpx.TransportError as exc:
                operation.failed(exc)
                raise
            return operation.judge(response)

        result: IdempotentResponse = await tenacity.AsyncRetrying(**self._retrying(operation))(
            attempt
        )
        return result

    async def get(self, url: str, **options: Any) -> IdempotentResponse:
        return await self.request("GET", url, **options)

    async def post(self, url: str, **options: Any) -> IdempotentResponse:
        return await self.request("POST", url, **options)

    async def put(self, url: str, **options: Any) -> IdempotentResponse:
        return await self.request("PUT", url, **options)

    async def patch(self, url: str, **options: Any) -> IdempotentResponse:
        return await self.request("PATCH", url, **options)

    async def delete(self, url: str, **options: Any) -> IdempotentResponse:
        return await self.request("DELETE", url, **options)

    async def aclose(self) -> None:
        if self._owned:
            await self.http.aclose()

    async def __aenter__(self) -> AsyncIdempotentClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


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
