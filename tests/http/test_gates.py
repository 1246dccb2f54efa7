"""Replays keep the view's gate (issue 36, finding 9): ``method_decorator(idempotent,
name="dispatch")`` and IdempotencyMiddleware replayed answers before the view's
permission and CSRF checks; a demoted admin replayed an ``IsAdminUser`` response."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.test import Client, override_settings

from idempotency.checks import check_settings
from tests.support.drf import with_drf
from tests.support.http import post
from tests.support.users import logged_in_client
from tests.testapp.executions import executions

pytestmark = pytest.mark.django_db(transaction=True)

MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "idempotency.IdempotencyMiddleware",
]


@pytest.fixture
def admin(user: Any) -> Any:
    user.is_staff = True
    user.save()
    return user


def demote(user: Any) -> None:
    user.is_staff = False
    user.save()


@pytest.mark.parametrize("url", with_drf(["/t/gates/staff-dispatch/"], ["/t/gates/admin-report/"]))
def test_a_demoted_admin_does_not_replay_a_dispatch_decorated_views_answer(
    url: str, admin: Any, execution_log: Path
) -> None:
    client = logged_in_client(admin)
    key = str(uuid.uuid4())
    first = post(client, url, key=key)
    again = post(client, url, key=key)
    assert first.status_code == again.status_code == 201
    assert again["Idempotent-Replayed"] == "true"  # still deduplicated while allowed
    demote(admin)
    refused = post(logged_in_client(admin), url, key=key)
    assert refused.status_code == 403
    assert "Idempotent-Replayed" not in refused
    assert b"IBAN" not in refused.content and b"staff only" not in refused.content
    assert executions(execution_log)[key] == 1


@pytest.mark.parametrize("url", with_drf(["/t/gates/staff-dispatch/"], ["/t/gates/admin-report/"]))
def test_a_dispatch_decorated_view_never_runs_for_a_caller_it_refuses(
    url: str, user: Any, execution_log: Path
) -> None:
    key = str(uuid.uuid4())
    assert post(logged_in_client(user), url, key=key).status_code == 403
    assert executions(execution_log)[key] == 0


@override_settings(MIDDLEWARE=MIDDLEWARE)
def test_under_the_middleware_a_class_based_views_check_runs_before_a_replay(
    admin: Any, execution_log: Path
) -> None:
    key = str(uuid.uuid4())
    client = logged_in_client(admin)
    assert post(client, "/t/gates/staff/", key=key).status_code == 201
    assert post(client, "/t/gates/staff/", key=key)["Idempotent-Replayed"] == "true"
    demote(admin)
    refused = post(logged_in_client(admin), "/t/gates/staff/", key=key)
    assert refused.status_code == 403 and "Idempotent-Replayed" not in refused
    assert executions(execution_log)[key] == 1


@override_settings(MIDDLEWARE=MIDDLEWARE)
def test_under_the_middleware_a_function_view_with_an_access_decorator_is_left_alone(
    admin: Any, execution_log: Path
) -> None:
    """Its check runs inside it, where the middleware cannot replay after it: it runs
    unprotected (E041 says so at startup), never replaying past the check."""
    key = str(uuid.uuid4())
    client = logged_in_client(admin)
    assert post(client, "/t/gates/staff-function/", key=key).status_code == 201
    again = post(client, "/t/gates/staff-function/", key=key)
    assert again.status_code == 201 and "Idempotent-Replayed" not in again
    demote(admin)
    assert post(logged_in_client(admin), "/t/gates/staff-function/", key=key).status_code == 302
    assert executions(execution_log)[key] == 2


@override_settings(MIDDLEWARE=MIDDLEWARE)
def test_under_the_middleware_a_replay_needs_the_csrf_token_the_view_needs(
    user: Any, execution_log: Path
) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    secret = "a" * 32
    client.cookies[settings.CSRF_COOKIE_NAME] = secret
    key = str(uuid.uuid4())
    first = post(client, "/t/gates/form/", key=key, HTTP_X_CSRFTOKEN=secret)
    again = post(client, "/t/gates/form/", key=key, HTTP_X_CSRFTOKEN=secret)
    assert first.status_code == again.status_code == 201
    assert again["Idempotent-Replayed"] == "true"
    forged = Client(enforce_csrf_checks=True)
    forged.force_login(user)  # the victim's session, without the token a site sets
    refused = post(forged, "/t/gates/form/", key=key)
    assert refused.status_code == 403 and "Idempotent-Replayed" not in refused
    assert executions(execution_log)[key] == 1


GATE_CHECKS = {"idempotency.E041", "idempotency.E042"}


def ids(**overrides: Any) -> list[str]:
    with override_settings(**overrides):
        return sorted(m.id for m in check_settings() if m.id in GATE_CHECKS)


def test_checks_name_the_views_whose_replays_would_skip_their_check() -> None:
    assert ids() == []
    assert ids(MIDDLEWARE=MIDDLEWARE) == ["idempotency.E041"]
    with override_settings(MIDDLEWARE=MIDDLEWARE):
        messages = {m.id: m.msg for m in check_settings()}
    assert "'staff-function'" in messages["idempotency.E041"]
    wrong = "tests.testapp.wrong_order_urls"
    assert ids(ROOT_URLCONF=wrong) == ["idempotency.E042"]  # @idempotent above the check
    with override_settings(ROOT_URLCONF=wrong):
        messages = {m.id: m.msg for m in check_settings()}
    assert "'wrong-order'" in messages["idempotency.E042"]


def test_idempotent_below_the_access_decorator_checks_first(user: Any, execution_log: Path) -> None:
    key = str(uuid.uuid4())
    anonymous = Client()
    assert post(anonymous, "/t/gates/right-order/", key=key).status_code == 302  # to the login page
    assert json.loads(post(logged_in_client(user), "/t/gates/right-order/", key=key).content) == {
        "done": True
    }
