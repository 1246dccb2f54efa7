"""Keep-alive over HTTP (issue 19, item 9): a lease-mode view whose body runs past its
lease, retried by ten concurrent clients, runs once; every client gets its one answer.
Executions are counted in an O_APPEND file no rollback undoes."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings

from tests.support.stores import STORE_VARIANTS
from tests.support.storms import run_threads
from tests.support.users import logged_in_client
from tests.testapp.executions import ENV, executions
from tests.testapp.models import Effect, Wallet

# ten writers at once: PostgreSQL (SQLite serialises writers and answers "locked")
pytestmark = [pytest.mark.server_db, pytest.mark.django_db(transaction=True)]

#: The lease the test's views hold, renewed every third of it. A body one and a half
#: leases long ends after the first lease has run out: it is answered once only if
#: renewals kept the key. The lease is long so a renewal may run four seconds late before
#: it runs out (lease mode's documented assumption: leases renewed in time): 2 s left
#: 1.33 s, and a loaded CI machine (2 CPUs, five test streams) stalls a process longer
#: (tests/core/test_keepalive.py's storms ran twice so, with 2 s of slack).
LEASE = 6.0
#: The view's length: past the first lease, so only renewals keep the key.
BODY = 1.5 * LEASE
LEASE_MODE = [
    pytest.param("db-lease", id="db-lease"),
    pytest.param("redis", id="redis", marks=pytest.mark.redis),
    pytest.param("cache", id="cache"),
]


@pytest.mark.parametrize("variant", LEASE_MODE)
def test_a_long_view_runs_once_under_ten_concurrent_retries(
    variant: str, user: Any, wallet: Wallet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counted = tmp_path / "executions.log"
    monkeypatch.setenv(ENV, str(counted))
    key = str(uuid.uuid4())
    body = json.dumps({"amount": 5, "label": "long"})

    def client_retrying(_index: int) -> tuple[int, bytes]:
        client = logged_in_client(user)
        deadline = time.monotonic() + 60
        while True:
            response = client.post(
                f"/t/lease-function/?sleep={BODY}",
                data=body,
                content_type="application/json",
                HTTP_IDEMPOTENCY_KEY=key,
            )
            if response.status_code != 409 or time.monotonic() > deadline:
                return response.status_code, response.content
            time.sleep(0.1)  # real time: a client honouring Retry-After, faster

    with override_settings(IDEMPOTENCY={**STORE_VARIANTS[variant], "LEASE": LEASE}):
        answers = run_threads(10, client_retrying)
    assert len({content for _status, content in answers}) == 1, answers
    assert {status for status, _content in answers} == {201}
    assert executions(counted)[key] == 1
    assert Effect.objects.count() == 1
    assert Wallet.objects.get().balance == 995
