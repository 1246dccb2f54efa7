"""The retrying clients, sync and async, on httpx with tenacity's retry loop."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NoReturn

import httpx
import tenacity

from idempotency.client.retries import (
    DEFAULT_HEADER,
    UNSAFE_METHODS,
    IdempotentResponse,
    Operation,
    RetryEvent,
    RetryPolicy,
    new_key,
    retry_after_seconds,
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
