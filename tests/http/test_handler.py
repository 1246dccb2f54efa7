"""``on_replay``: a view's hook adds headers to a replayed response (issue 46, item 4), on
``@idempotent``, ``IdempotentMixin`` (its method or its attribute), Django Ninja
(``@idempotent`` and ``protect()``) and the ``ON_REPLAY`` setting; a hook may add
headers and nothing else, and stored headers stay filtered whatever it does."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from django.test import Client, override_settings

from idempotency.exceptions import ImproperlyApplied
from tests.support.drf import with_drf
from tests.support.http import new_key, post
from tests.support.stores import STORE_VARIANTS
from tests.testapp import replay_hook_views
from tests.testapp.executions import executions

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def calls() -> Iterator[list[tuple[str, str, str]]]:
    """The hooks' calls; the views of ``replay_hook_urls`` routed (tests/http/ is
    marked with the test app's URLs, which a module's own mark cannot override)."""
    replay_hook_views.CALLS.clear()
    with override_settings(ROOT_URLCONF="tests.testapp.replay_hook_urls"):
        yield replay_hook_views.CALLS
    replay_hook_views.CALLS.clear()


def twice(client: Client, url: str, key: str) -> tuple[Any, Any]:
    first = post(client, url, key=key, HTTP_X_TRACE="t1")
    again = post(client, url, key=key, HTTP_X_TRACE="t2")
    return first, again


#: url, the hook's name in its trace id
HOOKED = with_drf(
    [
        ("/function/", "function"),
        ("/async/", "async"),
        ("/n/decorated", "ninja-decorator"),
        ("/n/r/protected", "ninja-protect"),
    ],
    [
        ("/drf-method/", "drf-method"),
        ("/mixin-method/", "mixin-method"),
        ("/mixin-attribute/", "mixin-attribute"),
    ],
)


@pytest.mark.parametrize(("url", "name"), HOOKED)
def test_the_hook_adds_headers_to_replays_only(
    store_variant: str,
    client_a: Client,
    execution_log: Path,
    calls: list[tuple[str, str, str]],
    url: str,
    name: str,
) -> None:
    key = new_key()
    first, again = twice(client_a, url, key)
    assert first.status_code == again.status_code == 201
    assert "X-Trace-Id" not in first and "Idempotency-Expires" not in first
    assert again["Idempotent-Replayed"] == "true"
    assert again.content == first.content
    assert again["X-Trace-Id"] == f"{name}-t2"  # computed now, for this request
    assert calls == [(name, url, key)]
    if name == "mixin-method":
        assert again["X-View"] == "MethodApi"  # a method of the view instance
    else:
        expires = datetime.fromisoformat(again["Idempotency-Expires"])
        left = (expires - datetime.now(UTC)).total_seconds()
        assert 86000 < left <= 86400  # the record's expiry: TTL after the first request
    assert executions(execution_log)[key] == 1


def test_the_setting_is_the_hook_of_views_that_name_none(
    client_a: Client, execution_log: Path, calls: list[tuple[str, str, str]]
) -> None:
    hook = "tests.testapp.replay_hook_views.set_cookie"
    with override_settings(IDEMPOTENCY={"ON_REPLAY": hook}):
        for url in with_drf(["/plain/"], ["/mixin-plain/"]):
            key = new_key()
            first, again = twice(client_a, url, key)
            assert "replayed" not in first.cookies
            assert again.cookies["replayed"].value == "1"
        # a view's own hook wins over the setting
        _, again = twice(client_a, "/function/", new_key())
        assert "replayed" not in again.cookies and again["X-Trace-Id"] == "function-t2"
    _, again = twice(client_a, "/plain/", new_key())
    assert "replayed" not in again.cookies and "X-Trace-Id" not in again


def test_views_under_the_middleware_take_the_setting(
    client_a: Client, execution_log: Path, calls: list[tuple[str, str, str]]
) -> None:
    from django.conf import settings

    middleware = [*settings.MIDDLEWARE, "idempotency.IdempotencyMiddleware"]
    hook = "tests.testapp.replay_hook_views.set_cookie"
    key = new_key()
    with override_settings(MIDDLEWARE=middleware, IDEMPOTENCY={"ON_REPLAY": hook}):
        first, again = twice(client_a, "/bare/", key)
    assert first.status_code == again.status_code == 201
    assert again["Idempotent-Replayed"] == "true" and again.content == first.content
    assert again.cookies["replayed"].value == "1" and "replayed" not in first.cookies
    assert executions(execution_log)[key] == 1


def test_the_setting_is_checked() -> None:
    from django.core.management import call_command
    from django.core.management.base import SystemCheckError

    with (
        override_settings(IDEMPOTENCY={"ON_REPLAY": "tests.nowhere.hook"}),
        pytest.raises(SystemCheckError, match="ON_REPLAY"),
    ):
        call_command("check")
    with override_settings(IDEMPOTENCY={"ON_REPLAY": None}):
        call_command("check")


def test_a_hook_may_set_a_cookie_of_its_own(client_a: Client) -> None:
    """The never-replayed list is about what was stored: a cookie the application sets
    now, for this request, is its own (as the session middleware's is)."""
    _, again = twice(client_a, "/cookie/", new_key())
    assert again["Idempotent-Replayed"] == "true"
    assert again.cookies["replayed"].value == "1"


@pytest.mark.parametrize(
    ("url", "wrong"),
    [
        ("/status/", "changed the status to 200"),
        ("/body/", "changed the body"),
        ("/hop-by-hop/", "set Connection"),
        ("/unmark/", "changed Idempotent-Replayed"),
        ("/return/", "returned HttpResponse"),
    ],
)
def test_a_hook_that_does_more_than_add_headers_is_refused(
    client_a: Client, execution_log: Path, url: str, wrong: str
) -> None:
    key = new_key()
    first = post(client_a, url, key=key)
    assert first.status_code == 201
    with pytest.raises(ImproperlyApplied, match=wrong):
        post(client_a, url, key=key)
    client_a.raise_request_exception = False
    again = post(client_a, url, key=key)
    assert again.status_code == 500 and b'"paid": false' not in again.content
    assert "Idempotent-Replayed" not in again
    assert executions(execution_log)[key] == 1  # never run again either


def test_a_view_that_is_not_replayed_never_calls_the_hook(
    client_a: Client, execution_log: Path, calls: list[tuple[str, str, str]]
) -> None:
    post(client_a, "/function/", key=new_key())
    post(client_a, "/function/")  # no key
    assert calls == []


def test_the_hook_is_not_called_for_an_unreadable_record(
    client_a: Client, execution_log: Path, calls: list[tuple[str, str, str]]
) -> None:
    from idempotency.models import IdempotencyRecord
    from tests.support.records import signed

    key = new_key()
    with override_settings(IDEMPOTENCY=STORE_VARIANTS["db-lease"]):
        post(client_a, "/function/", key=key)
        IdempotencyRecord.objects.filter(key=key).update(status_code=101)
        # signed again, as if by the application (issue 43's tag): the status check
        # alone refuses it, as defence in depth must
        row = IdempotencyRecord.objects.filter(key=key).values().get()
        IdempotencyRecord.objects.filter(key=key).update(mac=signed(row))
        refused = post(client_a, "/function/", key=key)
    assert json.loads(refused.content)["code"] == "idempotency-record-unreadable"
    assert calls == []


def test_on_replay_must_be_callable() -> None:
    from idempotency import idempotent

    with pytest.raises(ValueError, match="on_replay must be a function"):
        idempotent(on_replay="tests.testapp.replay_hook_views.set_cookie")
