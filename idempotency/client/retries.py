"""What the retrying client decides, apart from sending: which answers and errors are
worth another attempt, how long to wait before it, and what to say when time is up.

Nothing here imports Django: the client runs in any Python process.
"""

from __future__ import annotations

import email.utils
import json
import random
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime

import httpx

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
