"""``store_errors=True`` over HTTP: a view that *raises* has its answer stored and
replayed, as one that returns a 500 does (issue 19, defect 2), on every store and mode.

Executions are counted in an O_APPEND file (``tests.testapp.executions``), which no
rollback can undo: in atomic mode the view's rows roll back, its execution stays.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.test import Client, override_settings

from tests.support.drf import with_drf
from tests.support.http import post
from tests.support.stores import STORE_VARIANTS
from tests.testapp.executions import ENV, executions
from tests.testapp.models import Wallet

pytestmark = pytest.mark.django_db(transaction=True)

#: a plain Django function view, an async view (lease mode), a DRF APIView method
RAISING = with_drf(["/t/outcome/?raise=1", "/t/async/?raise=1"], ["/t/api/?raise=1"])


@pytest.fixture
def counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "executions.log"
    monkeypatch.setenv(ENV, str(path))
    return path


@pytest.mark.parametrize("url", RAISING)
def test_a_raised_exception_is_stored_and_replayed(
    store_variant: str, client_a: Client, wallet: Wallet, counted: Path, url: str
) -> None:
    client_a.raise_request_exception = False
    key = str(uuid.uuid4())
    with override_settings(IDEMPOTENCY={**STORE_VARIANTS[store_variant], "STORE_ERRORS": True}):
        first = post(client_a, url, key=key)
        again = post(client_a, url, key=key)
        third = post(client_a, url, key=key)
    assert first.status_code == 500
    assert "Idempotent-Replayed" not in first
    assert again.status_code == third.status_code == 500
    assert again["Idempotent-Replayed"] == third["Idempotent-Replayed"] == "true"
    assert again.content == first.content
    assert executions(counted)[key] == 1  # the body ran once; retries got its answer


@pytest.mark.parametrize("url", RAISING)
def test_without_store_errors_a_raised_exception_releases_the_key(
    store_variant: str, client_a: Client, wallet: Wallet, counted: Path, url: str
) -> None:
    client_a.raise_request_exception = False
    key = str(uuid.uuid4())
    first = post(client_a, url, key=key)
    again = post(client_a, url, key=key)
    assert first.status_code == again.status_code == 500
    assert "Idempotent-Replayed" not in again
    assert executions(counted)[key] == 2


@pytest.mark.redis
def test_a_foreign_value_under_a_redis_record_answers_a_problem_and_runs_nothing(
    user: Any, client_a: Client, wallet: Wallet, counted: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Defect 3 over HTTP: not a raw ``WRONGTYPE`` 500, but the library's problem."""
    from idempotency.stores.redis import RedisStore
    from idempotency.utils.hashing import log_ref
    from idempotency.utils.redis_clients import RedisConnector

    key = str(uuid.uuid4())
    scope = f"auth.user:{user.pk}"
    with override_settings(IDEMPOTENCY={**STORE_VARIANTS["redis"]}):
        name = RedisStore().record_key(scope, key)
        RedisConnector(cache="default").client.set(name, "foreign")
        response = post(client_a, "/t/outcome/", key=key)
    assert response.status_code == 500
    assert response["Content-Type"] == "application/problem+json"
    assert json.loads(response.content)["code"] == "idempotency-record-unreadable"
    assert executions(counted)[key] == 0
    # logged under its keyed hash, never the raw key (issue 36, finding 11)
    assert log_ref(scope, key) in caplog.text and key not in caplog.text
