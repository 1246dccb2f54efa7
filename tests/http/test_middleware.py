"""The middleware composes with Django's request handling instead of replacing it (DRF's
parsing after it: tests/contrib/drf/test_mixins.py)."""

from __future__ import annotations

import json
import logging
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.db import connections
from django.http import HttpRequest, HttpResponse
from django.test import Client, override_settings

from idempotency import IdempotencyMiddleware, idempotent
from idempotency.http.middleware import GATE_NAME, access_gate, gate_below_idempotent
from tests.support.drf import with_drf
from tests.support.users import logged_in_client, make_user
from tests.testapp.matrix_bodies import COUNTER_ENV, executions

pytestmark = pytest.mark.django_db(transaction=True)

MIDDLEWARE = [*settings.MIDDLEWARE, "idempotency.IdempotencyMiddleware"]
WITH_RECOVERY = [
    *settings.MIDDLEWARE,
    "tests.testapp.composition_views.RecoverMiddleware",
    "idempotency.IdempotencyMiddleware",
]


@pytest.fixture(autouse=True)
def counter_file(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv(COUNTER_ENV, str(tmp_path / "executions"))


@pytest.fixture
def client(db: Any) -> Client:
    return logged_in_client(make_user("composer"))


@pytest.fixture
def atomic_requests(monkeypatch: Any) -> None:
    monkeypatch.setitem(connections.settings["default"], "ATOMIC_REQUESTS", True)


def post(client: Client, url: str, key: str | None, probe: str, **kwargs: Any) -> Any:
    headers = {"X-Probe": probe}
    if key:
        headers["Idempotency-Key"] = key
    return client.post(
        url, data='{"amount": 2}', content_type="application/json", headers=headers, **kwargs
    )


def test_declares_sync_and_async_support() -> None:
    assert IdempotencyMiddleware.sync_capable is True
    assert IdempotencyMiddleware.async_capable is True


@pytest.mark.parametrize("url", with_drf(["/m/x/plain/"], ["/m/x/api/"]))
def test_atomic_requests_still_wraps_the_view(
    client: Client, atomic_requests: None, url: str
) -> None:
    key, probe = str(uuid.uuid4()), str(uuid.uuid4())
    with override_settings(MIDDLEWARE=MIDDLEWARE, IDEMPOTENCY={"MODE": "lease"}):
        first = post(client, url, key, probe)
        again = post(client, url, key, probe)
    assert first.status_code == 201
    assert json.loads(first.content)["atomic"] is True  # Django's ATOMIC_REQUESTS transaction
    assert again["Idempotent-Replayed"] == "true"
    assert executions(probe) == 1


def test_non_atomic_requests_is_respected(client: Client, atomic_requests: None) -> None:
    key, probe = str(uuid.uuid4()), str(uuid.uuid4())
    with override_settings(MIDDLEWARE=MIDDLEWARE):  # default mode: atomic where it can
        first = post(client, "/m/x/non-atomic/", key, probe)
        again = post(client, "/m/x/non-atomic/", key, probe)
    assert first.status_code == 201
    assert json.loads(first.content)["atomic"] is False  # no transaction: lease mode
    assert again["Idempotent-Replayed"] == "true"
    assert executions(probe) == 1


@pytest.mark.parametrize("mode", ["atomic", "lease"])
def test_other_middlewares_process_exception_still_runs(client: Client, mode: str) -> None:
    key, probe = str(uuid.uuid4()), str(uuid.uuid4())
    with override_settings(MIDDLEWARE=WITH_RECOVERY, IDEMPOTENCY={"MODE": mode}):
        first = post(client, "/m/x/raising/", key, probe)
        retry = post(client, "/m/x/raising/", key, probe)
    assert first.status_code == 503
    assert json.loads(first.content) == {"recovered": "handled by RecoverMiddleware"}
    # a 503 is transient: the key was released, so the retry ran the view again
    assert "Idempotent-Replayed" not in retry
    assert executions(probe) == 2


def test_streaming_responses_stream_and_are_stored(client: Client) -> None:
    """A streaming response reaches the client as a stream, and is buffered (up to
    MAX_RESPONSE_BYTES) and stored: the retry replays its bytes, the view ran once."""
    key, probe = str(uuid.uuid4()), str(uuid.uuid4())
    with override_settings(MIDDLEWARE=MIDDLEWARE, IDEMPOTENCY={"MODE": "lease"}):
        first = post(client, "/m/x/streaming/", key, probe)
        again = post(client, "/m/x/streaming/", key, probe)
    assert first.streaming and b"".join(first.streaming_content) == b"chunk-1,chunk-2"
    assert again["Idempotent-Replayed"] == "true"
    assert again.content == b"chunk-1,chunk-2"
    assert executions(probe) == 1


def test_the_view_still_reads_the_raw_body(client: Client) -> None:
    body = b'{"b": 1, "a": [1, 2]}'
    with override_settings(MIDDLEWARE=MIDDLEWARE):
        response = client.post(
            "/m/x/echo/",
            data=body,
            content_type="application/json",
            headers={"Idempotency-Key": str(uuid.uuid4()), "X-Probe": "echo"},
        )
    assert response.status_code == 201
    assert response.content == body


def test_a_view_it_cannot_plan_for_runs_untouched_with_a_warning(
    client: Client, caplog: pytest.LogCaptureFixture, monkeypatch: Any
) -> None:
    from idempotency.http import middleware

    def broken(view_func: Any, method: str) -> Any:
        raise TypeError("an odd view callable")

    monkeypatch.setattr(middleware, "plan_for", broken)
    probe = str(uuid.uuid4())
    with (
        override_settings(MIDDLEWARE=MIDDLEWARE),
        caplog.at_level(logging.WARNING, logger="idempotency"),
    ):
        first = post(client, "/m/x/plain/", "k-untouched", probe)
        again = post(client, "/m/x/plain/", "k-untouched", probe)
    assert (first.status_code, again.status_code) == (201, 201)
    assert "Idempotent-Replayed" not in again
    assert executions(probe) == 2
    assert "runs without idempotency" in caplog.text


def test_streaming_in_atomic_mode_still_streams(client: Client) -> None:
    key, probe = str(uuid.uuid4()), str(uuid.uuid4())
    with override_settings(MIDDLEWARE=MIDDLEWARE, IDEMPOTENCY={"MODE": "atomic"}):
        first = post(client, "/m/x/streaming/", key, probe)
    assert first.status_code == 200
    assert b"".join(first.streaming_content) == b"chunk-1,chunk-2"


@pytest.mark.parametrize("mode", ["atomic", "lease"])
@pytest.mark.parametrize("url", ["/m/x/dispatch-decorated/", "/m/x/hidden-decorated/"])
def test_a_key_is_handled_once_when_the_view_is_decorated_too(
    client: Client, url: str, mode: str
) -> None:
    key, probe = str(uuid.uuid4()), str(uuid.uuid4())
    with override_settings(MIDDLEWARE=MIDDLEWARE, IDEMPOTENCY={"MODE": mode}):
        first = post(client, url, key, probe)
        again = post(client, url, key, probe)
    assert first.status_code == 201, first.content
    assert again["Idempotent-Replayed"] == "true"
    assert again.content == first.content
    assert executions(probe) == 1


def test_django_login_view_works_under_the_middleware(db: Any) -> None:
    make_user("logs-in")  # password "pw"
    form = {"username": "logs-in", "password": "pw"}
    with override_settings(MIDDLEWARE=MIDDLEWARE):
        plain = Client().post("/m/x/login/", form)
        keyed = Client().post("/m/x/login/", form, headers={"Idempotency-Key": "login-1"})
        with override_settings(MIDDLEWARE=MIDDLEWARE, IDEMPOTENCY={"ANONYMOUS": "ignore"}):
            ignored = Client().post("/m/x/login/", form, headers={"Idempotency-Key": "login-2"})
    assert plain.status_code == 302  # logged in, as without the middleware
    # a key from an anonymous caller: the documented anonymous policy, not a 500
    assert keyed.status_code == 403
    assert keyed["Content-Type"] == "application/problem+json"
    assert ignored.status_code == 302


# -- access decorators, which a replay from outside the view would skip ---------------------


def _plain(request: HttpRequest) -> HttpResponse:
    return HttpResponse()


@idempotent
@login_required
def _keyed_then_gated(request: HttpRequest) -> HttpResponse:
    return HttpResponse()


@login_required
@idempotent
def _gated_then_keyed(request: HttpRequest) -> HttpResponse:
    return HttpResponse()


def test_an_access_decorator_is_found_and_idempotent_above_it_is_flagged() -> None:
    assert access_gate(idempotent(_plain)) is None
    assert access_gate(login_required(_plain)) == GATE_NAME
    assert gate_below_idempotent(_keyed_then_gated)
    assert not gate_below_idempotent(_gated_then_keyed)
