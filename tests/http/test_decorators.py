"""Decorator, mixin and middleware: where each applies, and clear errors where it cannot.

Over plain Django views, and DRF's too where DRF is installed; what is about DRF's views
alone (the decorator on them, the mixin, DRF's authentication under the middleware) is in
tests/contrib/drf/test_mixins.py."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.http import HttpRequest, HttpResponse
from django.test import Client, RequestFactory, override_settings
from django.views import View

from idempotency import idempotent
from idempotency.exceptions import ImproperlyApplied
from idempotency.models import IdempotencyRecord
from tests.support.drf import with_drf
from tests.support.http import post
from tests.support.stores import CACHE_STORE, using
from tests.testapp.executions import executions, record_execution
from tests.testapp.models import Effect, Wallet

pytestmark = pytest.mark.django_db(transaction=True)

MIDDLEWARE_SETTINGS = {
    "MIDDLEWARE": [
        "django.contrib.sessions.middleware.SessionMiddleware",
        "django.middleware.common.CommonMiddleware",
        "django.contrib.auth.middleware.AuthenticationMiddleware",
        "idempotency.IdempotencyMiddleware",
    ]
}


def test_decorating_a_django_view_class_is_refused() -> None:
    class Form(View):
        pass

    with pytest.raises(ImproperlyApplied, match="methods"):
        idempotent(Form)


def test_calling_a_decorated_non_view_fails_loudly() -> None:
    @idempotent
    def not_a_view(x: int) -> int:
        return x

    with pytest.raises(ImproperlyApplied, match="request"):
        not_a_view(1)


def test_a_callable_that_cannot_take_a_request_is_refused_at_decoration() -> None:
    with pytest.raises(ImproperlyApplied, match="no positional argument"):
        idempotent(lambda: HttpResponse())
    with pytest.raises(ImproperlyApplied, match="no positional argument"):

        @idempotent(required=True)
        def keyword_only(*, request: HttpRequest) -> HttpResponse:
            raise AssertionError("never runs")


def test_a_generator_is_refused_at_decoration() -> None:
    def chunks(request: HttpRequest) -> Iterator[bytes]:
        yield b"never"

    async def achunks(request: HttpRequest) -> AsyncIterator[bytes]:
        yield b"never"

    for func in (chunks, achunks):
        with pytest.raises(ImproperlyApplied, match="generator"):
            idempotent(func)


def keyed_request(user: Any, key: str) -> HttpRequest:
    request = RequestFactory().post(
        "/", data=b"{}", content_type="application/json", HTTP_IDEMPOTENCY_KEY=key
    )
    request.user = user
    return request


def test_a_view_declaring_a_non_response_is_refused_before_its_body(
    user: Any, execution_log: Path
) -> None:
    """Outside Django Ninja a view must return a response: one that declares ``-> dict``
    is refused on its first call, before its body runs."""

    @idempotent
    def view(request: HttpRequest) -> dict[str, int]:
        record_execution("declared")
        return {"paid": 1}

    request = keyed_request(user, "declared")
    with pytest.raises(ImproperlyApplied, match="declares it returns"):
        view(request)
    assert executions(execution_log)["declared"] == 0


@pytest.mark.parametrize("mode", ["atomic", "lease"])
def test_a_view_returning_a_non_response_is_refused_and_leaves_its_key_free(
    user: Any, execution_log: Path, mode: str
) -> None:
    """Undeclared, it can only be seen once the body returned: a clear ImproperlyApplied
    (not an AttributeError deep in the flow), and the key is released for a retry."""

    @idempotent(mode=mode)
    def view(request: HttpRequest):  # type: ignore[no-untyped-def]  # noqa: ANN202
        record_execution("undeclared")
        return {"paid": 1}

    request = keyed_request(user, "undeclared")
    with pytest.raises(ImproperlyApplied, match="returned dict"):
        view(request)
    assert not IdempotencyRecord.objects.filter(key="undeclared").exists()
    assert executions(execution_log)["undeclared"] == 1


def test_unknown_and_invalid_options_are_refused() -> None:
    with pytest.raises(TypeError, match="unknown options"):
        idempotent(tll=5)
    with pytest.raises(ValueError, match="mode"):
        idempotent(mode="sometimes")
    with pytest.raises(ValueError, match="ttl"):
        idempotent(ttl=-1)


@pytest.mark.parametrize("url", with_drf(["/t/function/"], ["/t/api/"]))
def test_atomic_mode_on_a_store_without_it_is_a_configuration_error(
    client_a: Client, wallet: Wallet, caplog: pytest.LogCaptureFixture, url: str
) -> None:
    client_a.raise_request_exception = True
    before = Effect.objects.count()
    with (
        override_settings(IDEMPOTENCY={**using(CACHE_STORE), "MODE": "atomic"}),
        caplog.at_level("ERROR", logger="idempotency"),
    ):
        response = post(client_a, url, key=str(uuid.uuid4()))
    assert response.status_code == 503
    assert response.json()["code"] == "idempotency-store-misconfigured"
    assert Effect.objects.count() == before  # the view did not run
    assert "cannot run atomic mode" in caplog.text


@pytest.mark.parametrize("url", with_drf(["/t/plain/"], ["/t/plain-api/"]))
def test_middleware_covers_function_and_drf_views(
    client_a: Client, wallet: Wallet, url: str
) -> None:
    with override_settings(**MIDDLEWARE_SETTINGS):
        key = str(uuid.uuid4())
        first = post(client_a, url, key=key)
        again = post(client_a, url, key=key)
    assert first.status_code == 201
    assert again["Idempotent-Replayed"] == "true"
    assert again.content == first.content
    assert Effect.objects.count() == 1


def test_middleware_leaves_exempt_views_alone(client_a: Client, wallet: Wallet) -> None:
    key = str(uuid.uuid4())
    with override_settings(**MIDDLEWARE_SETTINGS):
        post(client_a, "/t/plain-exempt/", key=key)
        again = post(client_a, "/t/plain-exempt/", key=key)
    assert "Idempotent-Replayed" not in again
    assert Effect.objects.count() == 2


#: views that handle their own keys: a decorated plain Django view; DRF's decorated APIView
#: and mixed-in viewset where DRF is installed
DECORATED = with_drf(["/t/function/"], ["/t/api/", "/t/viewset/"])


@pytest.mark.parametrize("url", DECORATED)
def test_middleware_does_not_double_handle_decorated_views(
    client_a: Client, wallet: Wallet, url: str
) -> None:
    key = str(uuid.uuid4())
    body = {"label": "v", "amount": 2}
    with override_settings(**MIDDLEWARE_SETTINGS):
        first = post(client_a, url, body, key=key)
        again = post(client_a, url, body, key=key)
    assert first.status_code == again.status_code == 201
    assert again["Idempotent-Replayed"] == "true"
    assert again.content == first.content
    assert Effect.objects.count() == 1


def test_non_http_exceptions_survive_pickling() -> None:
    import pickle

    from idempotency.exceptions import CallInProgress, LockNotAcquired

    lost = pickle.loads(pickle.dumps(LockNotAcquired("settle", 2.5)))
    assert (lost.name, lost.waited, str(lost)) == (
        "settle",
        2.5,
        "Lock 'settle' not acquired within 2.5 s",
    )
    busy = pickle.loads(pickle.dumps(CallInProgress("functions", "k1")))
    assert (busy.scope, busy.key) == ("functions", "k1")


def test_in_flow_sees_a_context_bound_on_the_request() -> None:
    """An inner interface finds the ``request.idempotency`` an outer one bound (on a DRF
    request too: tests/contrib/drf/test_mixins.py), and nothing else counts as a bound key."""
    from idempotency.http.requests import IdempotencyContext, in_flow
    from idempotency.stores.cache import CacheStore

    plain = RequestFactory().post("/x/")
    assert not in_flow(plain)
    plain.idempotency = "not a context"  # type: ignore[attr-defined]
    assert not in_flow(plain)
    plain.idempotency = IdempotencyContext(  # type: ignore[attr-defined]
        "scope", "key", "fp", "lease", CacheStore()
    )
    assert in_flow(plain)
