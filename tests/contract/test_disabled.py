"""``IDEMPOTENCY = {"ENABLED": False}``: every interface runs its body directly.

The store is a dotted path that does not exist, so touching it at all would fail the
request; a required key is not required; the same key twice runs the body twice.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from django.test import Client, override_settings

from idempotency.models import IdempotencyRecord
from tests.support.http import post
from tests.support.stores import using
from tests.testapp.executions import executions
from tests.testapp.models import Effect, Wallet

pytestmark = pytest.mark.django_db(transaction=True)

DISABLED = {"ENABLED": False, **using("no.such.Store")}

MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "idempotency.IdempotencyMiddleware",
]

# decorator (function, lease, async, DRF APIView, @api_view, Django CBV) and the mixin
DECORATED = [
    "/t/function/",
    "/t/lease-function/",
    "/t/async/",
    "/t/api/",
    "/t/api-view/",
    "/t/django-cbv/",
    "/t/viewset/",
]


#: What the views need (the serializers ask for a label).
BODY = {"amount": 2, "label": "off"}


@pytest.mark.parametrize("url", DECORATED)
def test_disabled_views_run_every_request_and_touch_no_store(
    client_a: Client, wallet: Wallet, execution_log: Path, url: str
) -> None:
    key = str(uuid.uuid4())
    with override_settings(IDEMPOTENCY=DISABLED):
        answers = [post(client_a, url, BODY, key=key) for _ in range(3)]
    assert [a.status_code for a in answers] == [201, 201, 201], [a.content for a in answers]
    assert all("Idempotent-Replayed" not in a for a in answers)
    assert executions(execution_log)[key] == 3
    assert Effect.objects.count() == 3
    assert not IdempotencyRecord.objects.exists()
    # enabled again, the same key is claimed afresh and replayed: nothing was stored
    first, again = post(client_a, url, BODY, key=key), post(client_a, url, BODY, key=key)
    assert first.status_code == 201 and again["Idempotent-Replayed"] == "true"
    assert executions(execution_log)[key] == 4


@pytest.mark.parametrize("url", ["/t/plain/", "/t/plain-api/"])
def test_disabled_middleware_runs_every_request(client_a: Client, wallet: Wallet, url: str) -> None:
    key = str(uuid.uuid4())
    with override_settings(IDEMPOTENCY=DISABLED, MIDDLEWARE=MIDDLEWARE):
        answers = [post(client_a, url, BODY, key=key) for _ in range(2)]
    assert [a.status_code for a in answers] == [201, 201]
    assert all("Idempotent-Replayed" not in a for a in answers)
    assert Effect.objects.count() == 2
    assert not IdempotencyRecord.objects.exists()


def test_disabled_required_key_is_not_required(client_a: Client, wallet: Wallet) -> None:
    """A view that requires a key answers 400 without one; with idempotency off it runs."""
    assert post(client_a, "/t/outcome/", BODY).status_code == 400
    with override_settings(IDEMPOTENCY=DISABLED):
        response = post(client_a, "/t/outcome/", BODY)
    assert response.status_code == 201
    assert Effect.objects.count() == 1
