"""``@idempotent`` on Django Ninja operations (tests/testapp/ninja_api.py): every kind of
result, replays, mismatches, requests in progress, Ninja's exceptions and crashes."""

from __future__ import annotations

import functools
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.http import HttpRequest
from django.test import Client, RequestFactory, override_settings
from django.urls import ResolverMatch
from ninja import NinjaAPI, Router
from ninja.decorators import decorate_view
from ninja.streaming import JSONL

from idempotency import idempotent
from idempotency.exceptions import ImproperlyApplied
from idempotency.models import IdempotencyRecord
from tests.support.http import post
from tests.testapp.executions import executions, record_execution
from tests.testapp.models import Effect, Wallet
from tests.testapp.ninja_api import PayOut
from tests.testapp.views import Gate

pytestmark = pytest.mark.django_db(transaction=True)

#: url -> the status of a first request (each returns another kind of result)
RESULTS = {
    "/n/dict/": 200,  # a dict
    "/n/schema/": 201,  # a Schema instance under response={201: ...}
    "/n/status/": 201,  # Status(201, body)
    "/n/tuple/": 201,  # (201, body)
    "/n/response/": 201,  # a JsonResponse (lease mode)
    "/n/async/": 201,  # an async operation
}


@pytest.mark.filterwarnings("ignore:Returning tuple:DeprecationWarning")
@pytest.mark.parametrize("url", list(RESULTS))
def test_each_kind_of_result_runs_once_and_replays_byte_for_byte(
    client_a: Client, wallet: Wallet, execution_log: Path, url: str
) -> None:
    key = str(uuid.uuid4())
    first, *repeats = [post(client_a, url, key=key) for _ in range(3)]
    assert first.status_code == RESULTS[url]
    assert first.json() == {"id": Effect.objects.get().pk, "amount": 5}
    assert "Idempotent-Replayed" not in first
    for repeat in repeats:
        assert repeat.status_code == first.status_code
        assert repeat.content == first.content
        assert repeat["Content-Type"] == first["Content-Type"]
        assert repeat["Idempotent-Replayed"] == "true"
    assert executions(execution_log)[key] == 1
    assert Wallet.objects.get().balance == 995


@pytest.mark.parametrize("url", ["/n/status/", "/n/async/"])
def test_the_same_key_with_another_body_is_a_mismatch(
    client_a: Client, wallet: Wallet, execution_log: Path, url: str
) -> None:
    key = str(uuid.uuid4())
    assert post(client_a, url, key=key).status_code == 201
    other = post(client_a, url, body={"amount": 3}, key=key)
    assert other.status_code == 422
    assert other["Content-Type"] == "application/problem+json"
    assert other.json()["code"] == "idempotency-key-mismatch"
    assert executions(execution_log)[key] == 1


def test_the_same_key_on_another_operation_is_a_mismatch(
    client_a: Client, wallet: Wallet, execution_log: Path
) -> None:
    key = str(uuid.uuid4())
    assert post(client_a, "/n/status/", key=key).status_code == 201
    assert post(client_a, "/n/schema/", key=key).json()["code"] == "idempotency-key-mismatch"
    assert executions(execution_log)[key] == 1


@pytest.mark.parametrize(
    "url",
    [
        # atomic mode: the claim's row lock is held until the body's transaction ends
        pytest.param("/n/status/", marks=pytest.mark.postgres),
        "/n/response/",
        "/n/async/",
    ],
)
def test_a_duplicate_of_a_request_in_progress_gets_409(
    user: Any, client_a: Client, wallet: Wallet, gate: Gate, execution_log: Path, url: str
) -> None:
    key = str(uuid.uuid4())
    first: list[Any] = []
    held = url + "?hold=before"  # the first stops before its writes (SQLite: no lock held)
    thread = threading.Thread(target=lambda: first.append(post(client_a, held, key=key)))
    thread.start()
    try:
        assert gate.entered.wait(10)
        # atomic mode: the duplicate waits on the first's claim up to LOCK_TIMEOUT, then 409
        with override_settings(IDEMPOTENCY={"LOCK_TIMEOUT": 0.5}):
            duplicate = post(client_a, held, key=key)
    finally:
        gate.release.set()
        thread.join(10)
    assert duplicate.status_code == 409
    assert duplicate.json()["code"] == "idempotency-request-in-progress"
    assert int(duplicate["Retry-After"]) >= 1
    assert first[0].status_code == 201
    assert post(client_a, held, key=key).content == first[0].content
    assert executions(execution_log)[key] == 1


@pytest.mark.parametrize("url", ["/n/status/?missing=1", "/n/async-missing/"])
def test_a_ninja_http_error_is_a_definitive_answer_stored_and_replayed(
    client_a: Client, wallet: Wallet, execution_log: Path, url: str
) -> None:
    key = str(uuid.uuid4())
    first = post(client_a, url, key=key)
    assert first.status_code == 404
    assert first.json() == {"detail": "no such thing"}
    again = post(client_a, url, key=key)
    assert (again.status_code, again.content) == (404, first.content)
    assert again["Idempotent-Replayed"] == "true"
    assert executions(execution_log)[key] == 1


def test_an_unhandled_exception_releases_the_key(
    client_a: Client, wallet: Wallet, execution_log: Path
) -> None:
    client_a.raise_request_exception = False
    key = str(uuid.uuid4())
    assert post(client_a, "/n/crash/", key=key).status_code == 500
    assert not IdempotencyRecord.objects.filter(key=key).exists()
    assert post(client_a, "/n/crash/", key=key).status_code == 500  # a retry runs it again
    assert executions(execution_log)[key] == 2
    assert Effect.objects.count() == 0  # atomic mode rolled each attempt back


@pytest.mark.parametrize("mode", ["atomic", "lease"])
def test_a_result_ninja_cannot_answer_releases_the_key(
    client_a: Client, wallet: Wallet, execution_log: Path, mode: str
) -> None:
    """A result that cannot become a response (a status the operation does not declare)
    is only seen after the body ran: Ninja's ConfigError, a 500, and the key left free
    (atomic mode: the body's writes rolled back with the claim)."""
    client_a.raise_request_exception = False
    key = str(uuid.uuid4())
    with override_settings(IDEMPOTENCY={"MODE": mode}):
        assert post(client_a, "/n/undeclared-status/", key=key).status_code == 500
        assert not IdempotencyRecord.objects.filter(key=key).exists()
        assert post(client_a, "/n/undeclared-status/", key=key).status_code == 500
    assert executions(execution_log)[key] == 2
    assert Effect.objects.count() == (0 if mode == "atomic" else 2)


def test_invalid_input_is_ninjas_422_before_any_claim(
    client_a: Client, wallet: Wallet, execution_log: Path
) -> None:
    key = str(uuid.uuid4())
    response = post(client_a, "/n/status/", body={"amount": "lots"}, key=key)
    assert response.status_code == 422
    assert "detail" in response.json()  # Ninja's validation answer, not ours
    assert not IdempotencyRecord.objects.filter(key=key).exists()
    assert executions(execution_log)[key] == 0
    assert post(client_a, "/n/status/", key=key).status_code == 201  # the key is still free


def test_safe_methods_and_unkeyed_requests_run_as_usual(
    client_a: Client, wallet: Wallet, execution_log: Path
) -> None:
    for _ in range(2):
        response = client_a.get("/n/dict/", HTTP_IDEMPOTENCY_KEY="k")
        assert response.json() == {"read": True}
        assert "Idempotent-Replayed" not in response
    assert executions(execution_log)["read"] == 2
    assert [post(client_a, "/n/status/", key=None).status_code for _ in range(2)] == [201, 201]
    assert Effect.objects.count() == 2
    assert not IdempotencyRecord.objects.exists()


def test_a_malformed_key_is_a_problem_and_runs_nothing(
    client_a: Client, wallet: Wallet, execution_log: Path
) -> None:
    response = post(client_a, "/n/status/", key="x" * 300)
    assert response.status_code == 400
    assert response.json()["code"] == "idempotency-key-invalid"
    assert Effect.objects.count() == 0


# -- what @idempotent cannot wrap is refused before any body runs --------------------------


def test_decorate_view_around_the_operation_is_refused_at_import() -> None:
    """``decorate_view`` wraps the operation's run, before Ninja's authentication."""
    router = Router()
    with pytest.raises(ImproperlyApplied, match="before Ninja authenticates"):

        @router.post("/x/")
        @decorate_view(idempotent)
        def pay(request: HttpRequest) -> dict[str, int]:
            raise AssertionError("never runs")


def test_idempotent_above_the_route_decorator_is_refused() -> None:
    router = Router()
    with pytest.raises(ImproperlyApplied, match="below @api.post"):

        @idempotent
        @router.post("/x/")
        def pay(request: HttpRequest) -> dict[str, int]:
            raise AssertionError("never runs")


def test_a_streaming_operation_is_refused_when_it_is_built() -> None:
    router = Router()
    with pytest.raises(ImproperlyApplied, match="generator"):

        @router.post("/x/", response=JSONL[PayOut])
        @idempotent
        def stream(request: HttpRequest) -> Iterator[dict[str, int]]:
            yield {"id": 1, "amount": 1}


def test_an_async_operation_in_atomic_mode_is_refused_at_import() -> None:
    with pytest.raises(ImproperlyApplied, match="async"):

        @idempotent(mode="atomic")
        async def pay(request: HttpRequest) -> dict[str, int]:
            raise AssertionError("never runs")


def test_ninjas_own_router_decorator_is_refused_when_the_urls_are_built() -> None:
    """``Router.add_decorator(idempotent)`` wraps each mounted copy's function after the
    operation was built, where the flow cannot reach it: refused at startup."""
    api = NinjaAPI(urls_namespace=f"refused-{uuid.uuid4()}")
    router = Router()
    router.add_decorator(idempotent)

    @router.post("/")
    def pay(request: HttpRequest) -> dict[str, int]:
        raise AssertionError("never runs")

    api.add_router("/", router)
    with pytest.raises(ImproperlyApplied, match="add_decorator"):
        api.urls  # noqa: B018


def test_a_wrapper_that_hides_the_operation_is_refused_before_the_body(
    user: Any, execution_log: Path
) -> None:
    """Where nothing says at startup that the function is an operation's (here a
    ``partial`` hides it), the first request is refused before the body runs."""
    api = NinjaAPI(urls_namespace=f"hidden-{uuid.uuid4()}")
    router = Router()
    router.add_decorator(lambda view: idempotent(functools.partial(view)))

    @router.post("/")
    def pay(request: HttpRequest) -> dict[str, int]:
        record_execution("hidden")
        return {"paid": 1}

    api.add_router("/", router)
    (view,) = [p.callback for p in api.urls[0] if p.callback.__module__ == "ninja.operation"]
    request = RequestFactory().post(
        "/", data=b"{}", content_type="application/json", HTTP_IDEMPOTENCY_KEY="hidden"
    )
    request.user = user
    request.resolver_match = ResolverMatch(view, (), {})
    with pytest.raises(ImproperlyApplied, match="not bound"):
        view(request)
    assert executions(execution_log)["hidden"] == 0
    assert not IdempotencyRecord.objects.exists()
