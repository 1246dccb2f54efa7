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
