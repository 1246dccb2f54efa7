"""Streaming and oversized responses: never a 2xx for rolled-back writes, never a rerun.

Streaming responses (``StreamingHttpResponse``, ``FileResponse``) are buffered up to
``MAX_RESPONSE_BYTES`` and stored like any other; the client still gets the stream.
Above the limit the view's writes commit, the client gets its whole response, and
retries get ``410 idempotency-response-not-stored``: the body never runs twice.
Every store and mode (the ``store_variant`` fixture).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client, override_settings

from idempotency.conf import idempotency_settings
from tests.support.http import post
from tests.testapp.models import Effect, Wallet

pytestmark = pytest.mark.django_db(transaction=True)


def body_of(response: Any) -> bytes:
    if response.streaming:
        return b"".join(response.streaming_content)
    return bytes(response.content)


@pytest.mark.parametrize("url", ["/t/stream/?size=3000", "/t/file/"])
def test_streaming_response_commits_is_stored_and_replays(
    client_a: Client, wallet: Wallet, store_variant: str, url: str
) -> None:
    first = post(client_a, url, key="stream-1")
    assert first.status_code == 201
    first_body = body_of(first)
    assert first_body  # the client got the whole stream
    assert Effect.objects.count() == 1  # the writes committed with the 201
    assert Wallet.objects.get().balance == 995
    again = post(client_a, url, key="stream-1")
    assert again.status_code == 201
    assert again["Idempotent-Replayed"] == "true"
    assert body_of(again) == first_body
    assert again["Content-Type"] == first["Content-Type"]
    assert Effect.objects.count() == 1


@pytest.mark.parametrize("url", ["/t/stream/?size=5000", "/t/big/?size=5000"])
def test_response_over_the_limit_commits_once_and_retries_get_410(
    client_a: Client, wallet: Wallet, store_variant: str, url: str
) -> None:
    config = {**(idempotency_settings.user_settings), "MAX_RESPONSE_BYTES": 2048}
    with override_settings(IDEMPOTENCY=config):
        first = post(client_a, url, key="big-1")
        assert first.status_code == 201
        assert len(body_of(first)) == 5000  # the first caller gets all of it
        assert Effect.objects.count() == 1
        for _ in range(2):
            retry = post(client_a, url, key="big-1")
            assert retry.status_code == 410
            assert retry["Content-Type"] == "application/problem+json"
            problem = json.loads(retry.content)
            assert problem["code"] == "idempotency-response-not-stored"
            assert problem["original_status"] == 201
            assert retry["Idempotent-Replayed"] == "true"
        assert Effect.objects.count() == 1
        assert Wallet.objects.get().balance == 995
        # a response within the limit is still stored whole
        small = post(client_a, url.replace("5000", "1000"), key="big-2")
        assert post(client_a, url.replace("5000", "1000"), key="big-2").content == body_of(small)


def test_no_limit_stores_everything(client_a: Client, wallet: Wallet) -> None:
    with override_settings(IDEMPOTENCY={"MAX_RESPONSE_BYTES": None}):
        first = post(client_a, "/t/big/?size=300000", key="huge")
        again = post(client_a, "/t/big/?size=300000", key="huge")
    assert again.status_code == 201 and again.content == first.content
    assert len(first.content) == 300000
