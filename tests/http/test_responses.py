"""What a stored response keeps for replay (idempotency/http/responses.py)."""

from __future__ import annotations

from django.http import HttpResponse
from django.test import override_settings

from idempotency.http.responses import capture, replay


def test_set_cookie_and_hop_by_hop_headers_are_never_kept_even_when_listed() -> None:
    response = HttpResponse(b"{}", content_type="application/json", status=201)
    response["Location"] = "/orders/1"
    response["Connection"] = "close"
    response.set_cookie("session", "secret")
    listed = ["Location", "Set-Cookie", "Connection"]
    with override_settings(IDEMPOTENCY={"REPLAY_HEADERS": listed}):
        stored = capture(response)
        replayed = replay(stored)
    names = {name.lower() for name, _value in stored.headers}
    assert names == {"content-type", "location"}
    assert not replayed.cookies
    assert replayed["Location"] == "/orders/1"


def test_a_replay_is_the_stored_response_marked_as_replayed() -> None:
    from idempotency.stores.base import StoredResponse

    stored = StoredResponse(
        201,
        [("Content-Type", "application/json"), ("Location", "/orders/1"), ("Vary", "Accept")],
        b'{"id": 1}',
    )
    replayed = replay(stored)
    assert replayed.status_code == 201 and replayed.content == b'{"id": 1}'
    assert list(replayed.items()) == [*stored.headers, ("Idempotent-Replayed", "true")]


def test_a_replay_of_a_response_without_a_content_type_has_none() -> None:
    from idempotency.stores.base import StoredResponse

    replayed = replay(StoredResponse(204, [("Location", "/orders/1")], b""))
    assert replayed.status_code == 204 and "Content-Type" not in replayed
    assert list(replayed.items()) == [("Location", "/orders/1"), ("Idempotent-Replayed", "true")]


def test_a_stored_header_that_could_split_the_response_is_refused() -> None:
    import pytest

    from idempotency.http.responses import UnreplayableResponse
    from idempotency.stores.base import StoredResponse

    # a record no response can be: unreadable (issue 43, finding 3), never Django's 500
    with pytest.raises(UnreplayableResponse):
        replay(StoredResponse(201, [("Location", "/a\r\nSet-Cookie: x=1")], b""))
