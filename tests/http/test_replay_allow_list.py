"""Replay reads a stored record through the allow-list, whatever wrote it (issue 43,
finding 3: planted ``Set-Cookie``, ``Location`` and ``Content-Type`` headers, and a
planted 302, were replayed as stored).

Each record is planted through the store's own write path (the view's response is
swapped for a forged one just before it is stored, so it is written as a record of
the library is, and would pass any check a store makes of what it holds); the replay
that reads it back is the library's, untouched. Every store and mode: the database
(SQLite, and PostgreSQL with ``DATABASE_URL``), its response cache, Redis, the cache.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.test import Client, override_settings

from idempotency.http import handler
from idempotency.stores.base import StoredResponse
from idempotency.utils.hashing import log_ref
from tests.support.drf import with_drf
from tests.support.http import new_key, post
from tests.support.stores import STORE_VARIANTS
from tests.testapp.executions import executions
from tests.testapp.models import Wallet

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.urls("tests.urls")]

#: a plain Django function view, an async view (lease mode), a DRF APIView method
URLS = with_drf(["/t/outcome/", "/t/async/"], ["/t/api/"])

EVIL = [
    ("Set-Cookie", "sessionid=planted; Path=/"),
    ("set-cookie2", "csrftoken=planted"),
    ("Connection", "close"),
    ("Transfer-Encoding", "chunked"),
    ("X-Planted", "1"),
    ("Refresh", "0; url=https://evil.example/"),
    ("Access-Control-Allow-Origin", "*"),
]


@contextlib.contextmanager
def planted(status: int | None = None, headers: list[tuple[str, str]] = ()) -> Iterator[None]:  # type: ignore[assignment]
    """While open, a response about to be stored is stored with ``status`` and with
    ``headers`` added: what someone who can write to the store plants."""
    real_kept, real_akept = handler.kept, handler.akept

    def forge(stored: StoredResponse) -> StoredResponse:
        return StoredResponse(
            stored.status if status is None else status,
            [*stored.headers, *headers],
            stored.body,
        )

    def kept(response: Any, **options: Any) -> StoredResponse:
        return forge(real_kept(response, **options))

    async def akept(response: Any, **options: Any) -> StoredResponse:
        return forge(await real_akept(response, **options))

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(handler, "kept", kept)
        patch.setattr(handler, "akept", akept)
        yield


@dataclass
class Caller:
    """client_a, its user, and the count of each key's view executions."""

    user: Any
    client: Client
    log: Path

    def post(self, url: str, key: str) -> Any:
        return post(self.client, url, key=key)

    def runs(self, key: str) -> int:
        return executions(self.log)[key]


@pytest.fixture
def caller(user: Any, client_a: Client, wallet: Wallet, execution_log: Path) -> Caller:
    return Caller(user, client_a, execution_log)


@pytest.mark.parametrize("url", URLS)
def test_planted_headers_are_not_replayed(
    store_variant: str, caller: Caller, caplog: pytest.LogCaptureFixture, url: str
) -> None:
    key = new_key()
    with planted(headers=EVIL):
        first = caller.post(url, key)
    again = caller.post(url, key)
    third = caller.post(url, key)  # db-cached: from the response cache
    assert first.status_code == again.status_code == third.status_code == 201
    for replayed in (again, third):
        assert replayed["Idempotent-Replayed"] == "true"
        assert replayed.content == first.content
        assert replayed["Content-Type"] == "application/json"
        for name, _value in EVIL:
            assert name not in replayed
        assert "sessionid" not in replayed.cookies and "csrftoken" not in replayed.cookies
    assert caller.runs(key) == 1
    # what the library never stores is evidence of a writer: logged, under the key's hash
    assert "never stored (connection, set-cookie, set-cookie2, transfer-encoding)" in caplog.text
    assert log_ref(f"auth.user:{caller.user.pk}", key) in caplog.text
    assert key not in caplog.text


def test_a_header_left_out_of_replay_headers_is_not_replayed(
    store_variant: str, caller: Caller
) -> None:
    """``Location`` is replayed while ``REPLAY_HEADERS`` names it, and not once it does not:
    the allow-list is read when the record is, not only when it was written."""
    key, other = new_key(), new_key()
    with planted(status=302, headers=[("Location", "https://evil.example/")]):
        assert caller.post("/t/outcome/", key).status_code == 201
        assert caller.post("/t/outcome/", other).status_code == 201
    allowed = caller.post("/t/outcome/", key)
    assert allowed.status_code == 302 and allowed["Location"] == "https://evil.example/"
    narrowed = {**STORE_VARIANTS[store_variant], "REPLAY_HEADERS": ["ETag"]}
    with override_settings(IDEMPOTENCY=narrowed):
        refused = caller.post("/t/outcome/", other)
    assert refused.status_code == 302 and refused["Idempotent-Replayed"] == "true"
    assert "Location" not in refused
    assert caller.runs(key) == caller.runs(other) == 1


#: statuses the library never stores: informational, authentication failures, no status
NEVER_STORED = [0, 99, 100, 101, 103, 199, 401, 403, 407, 600, 999]

#: What is planted, and what the replay then says in the log: headers no response has
#: (a second Content-Type after the view's, which Django would keep as the last one it
#: is given; a line break), and statuses the library never stores, on each kind of view
FORGERIES = [
    *(
        pytest.param(url, None, headers, reason, id=f"{name}-{url}")
        for url in URLS
        for name, headers, reason in [
            ("second-content-type", [("content-type", "text/html")], "a header twice"),
            ("line-break", [("ETag", '"a"\r\nSet-Cookie: sessionid=x')], "cannot be sent"),
        ]
    ),
    *(
        pytest.param(URLS[0], status, [], f"its status {status} is never stored", id=str(status))
        for status in NEVER_STORED
    ),
    *(
        pytest.param(url, status, [], f"its status {status} is never stored", id=f"{status}-{url}")
        for url in URLS[1:]
        for status in (101, 401, 999)
    ),
]


@pytest.mark.parametrize(("url", "status", "headers", "reason"), FORGERIES)
def test_a_record_no_response_of_the_library_is_refused_as_unreadable(
    store_variant: str,
    caller: Caller,
    caplog: pytest.LogCaptureFixture,
    url: str,
    status: int | None,
    headers: list[tuple[str, str]],
    reason: str,
) -> None:
    key = new_key()
    with planted(status=status, headers=headers):
        assert caller.post(url, key).status_code == 201
    caplog.clear()
    again = caller.post(url, key)
    third = caller.post(url, key)
    for refused in (again, third):
        assert refused.status_code == 500
        assert refused["Content-Type"] == "application/problem+json"
        assert "Idempotent-Replayed" not in refused and "Set-Cookie" not in refused
        assert json.loads(refused.content)["code"] == "idempotency-record-unreadable"
    assert reason in caplog.text and "unreadable" in caplog.text
    assert log_ref(f"auth.user:{caller.user.pk}", key) in caplog.text
    assert key not in caplog.text
    assert caller.runs(key) == 1  # refused, never run again


@pytest.mark.parametrize("status", [200, 202, 303, 404, 410, 422, 500, 503])
def test_a_status_the_library_stores_is_replayed(
    store_variant: str, caller: Caller, status: int
) -> None:
    """What a view may have stored (redirects, definitive 4xx, errors where a view stores
    them, the 410 of a response too large to keep) replays as stored."""
    key = new_key()
    with planted(status=status):
        first = caller.post("/t/outcome/", key)
    again = caller.post("/t/outcome/", key)
    assert again.status_code == status and again["Idempotent-Replayed"] == "true"
    assert again.content == first.content
    assert caller.runs(key) == 1
