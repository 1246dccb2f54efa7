"""The HTTP contract of DESIGN.md §2, through real views, on every store and mode."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.test import Client, override_settings

from idempotency import signals
from idempotency.models import IdempotencyRecord
from idempotency.stores.base import get_store
from tests.support.http import H, new_key, post
from tests.support.problems import problem
from tests.testapp.executions import executions
from tests.testapp.models import Effect, Wallet

pytestmark = pytest.mark.django_db(transaction=True)


URLS = ["/t/function/", "/t/api/", "/t/viewset/", "/t/api-view/", "/t/django-cbv/"]


@pytest.mark.parametrize("url", URLS)
def test_first_call_runs_and_repeat_replays(
    store_variant: str, client_a: Client, wallet: Wallet, url: str
) -> None:
    key = new_key()
    first = post(client_a, url, {"amount": 5, "label": "x"}, key)
    assert first.status_code == 201, first.content
    assert "Idempotent-Replayed" not in first
    again = post(client_a, url, {"label": "x", "amount": 5}, key)  # same body, other key order
    assert again.status_code == 201
    assert again.content == first.content
    assert again["Content-Type"] == first["Content-Type"]
    assert again["Idempotent-Replayed"] == "true"
    assert Effect.objects.count() == 1
    assert Wallet.objects.get().balance == 995


def test_without_key_every_call_runs(store_variant: str, client_a: Client, wallet: Wallet) -> None:
    assert post(client_a, "/t/function/").status_code == 201
    assert post(client_a, "/t/function/").status_code == 201
    assert Effect.objects.count() == 2


def test_required_key_missing_is_400(client_a: Client, wallet: Wallet) -> None:
    response = post(client_a, "/t/outcome/")
    assert response.status_code == 400
    assert problem(response)["code"] == "idempotency-key-required"
    assert Effect.objects.count() == 0


def test_required_setting_applies_globally(client_a: Client, wallet: Wallet) -> None:
    with override_settings(IDEMPOTENCY={"REQUIRED": True}):
        response = post(client_a, "/t/function/")
    assert response.status_code == 400
    assert problem(response)["code"] == "idempotency-key-required"


@pytest.mark.parametrize("raw", ["", "a,b", "x" * 256, '"open', "caf\u00e9"])
def test_malformed_key_is_400(client_a: Client, wallet: Wallet, raw: str) -> None:
    response = post(client_a, "/t/api/", key=raw)
    assert response.status_code == 400
    assert problem(response)["code"] == "idempotency-key-invalid"
    assert Effect.objects.count() == 0


def test_quoted_and_bare_forms_are_one_key(client_a: Client, wallet: Wallet) -> None:
    first = post(client_a, "/t/api/", key="abc-123")
    again = post(client_a, "/t/api/", key='"abc-123"')
    assert again["Idempotent-Replayed"] == "true"
    assert again.content == first.content


def test_key_on_safe_method_is_ignored(client_a: Client, wallet: Wallet) -> None:
    malformed = client_a.get("/t/viewset/", **{H: "a,b"})
    assert malformed.status_code == 200
    assert malformed.json() == []
    key = new_key()
    post(client_a, "/t/viewset/", {"label": "one", "amount": 1})
    first = client_a.get("/t/viewset/", **{H: key})
    post(client_a, "/t/viewset/", {"label": "two", "amount": 1})
    again = client_a.get("/t/viewset/", **{H: key})
    assert [e["label"] for e in first.json()] == ["one"]
    assert [e["label"] for e in again.json()] == ["one", "two"]  # ran again, not replayed
    assert "Idempotent-Replayed" not in again
    assert not IdempotencyRecord.objects.filter(key__in=["a,b", key]).exists()


def test_other_body_with_same_key_is_422(
    store_variant: str, client_a: Client, wallet: Wallet
) -> None:
    key = new_key()
    post(client_a, "/t/api/", {"amount": 5}, key)
    response = post(client_a, "/t/api/", {"amount": 6}, key)
    assert response.status_code == 422
    assert problem(response)["code"] == "idempotency-key-mismatch"
    assert Effect.objects.count() == 1


def test_same_key_on_another_endpoint_is_422(
    client_a: Client, wallet: Wallet, execution_log: Path
) -> None:
    key = new_key()
    first = post(client_a, "/t/api/", {"amount": 5}, key)
    response = post(client_a, "/t/function/", {"amount": 5}, key)
    assert response.status_code == 422
    assert problem(response)["code"] == "idempotency-key-mismatch"
    assert executions(execution_log)[key] == 1  # the other endpoint's body never ran
    assert Wallet.objects.get().balance == 995
    record = IdempotencyRecord.objects.get(key=key)
    assert (record.route, record.state) == ("/t/api/", "completed")
    assert bytes(record.response_body) == first.content  # the first answer is kept


def test_other_user_with_same_key_runs_for_themselves(
    store_variant: str, client_a: Client, client_b: Client, wallet: Wallet
) -> None:
    key = new_key()
    first = post(client_a, "/t/api/", {"amount": 5}, key)
    theirs = post(client_b, "/t/api/", {"amount": 5}, key)
    assert theirs.status_code == 201
    assert "Idempotent-Replayed" not in theirs
    assert theirs.content != first.content
    assert Effect.objects.count() == 2


def test_anonymous_caller_never_gets_a_stored_response(client_a: Client, wallet: Wallet) -> None:
    key = new_key()
    post(client_a, "/t/api/", {"amount": 5}, key)
    anonymous = Client()
    response = post(anonymous, "/t/api/", {"amount": 5}, key)
    assert response.status_code in (401, 403)
    assert "Idempotent-Replayed" not in response
    # a wrong token: authentication fails before any replay
    response = post(Client(HTTP_AUTHORIZATION="Token nope"), "/t/api/", {"amount": 5}, key)
    assert response.status_code == 401
    assert "Idempotent-Replayed" not in response


def test_anonymous_key_on_open_view_is_refused_by_default(wallet: Wallet) -> None:
    response = post(Client(), "/t/function/", {"amount": 5}, new_key())
    assert response.status_code == 403
    assert problem(response)["code"] == "idempotency-anonymous-not-allowed"
    assert Effect.objects.count() == 0


def test_anonymous_policy_ignore_runs_without_idempotency(wallet: Wallet) -> None:
    key = new_key()
    with override_settings(IDEMPOTENCY={"ANONYMOUS": "ignore"}):
        first = post(Client(), "/t/function/", {"amount": 5}, key)
        again = post(Client(), "/t/function/", {"amount": 5}, key)
    assert first.status_code == again.status_code == 201
    assert "Idempotent-Replayed" not in again
    assert Effect.objects.count() == 2


@pytest.mark.parametrize("code", [500, 503, 408, 409, 425, 429])
def test_5xx_and_transient_4xx_release_the_key(
    store_variant: str, client_a: Client, wallet: Wallet, code: int
) -> None:
    key = new_key()
    first = post(client_a, f"/t/outcome/?status={code}", key=key)
    assert first.status_code == code
    again = post(client_a, f"/t/outcome/?status={code}", key=key)
    assert again.status_code == code
    assert "Idempotent-Replayed" not in again
    # atomic mode rolled both attempts back; lease mode kept the effects it made
    expected = 0 if store_variant in ("db-atomic", "db-cached") else 2
    assert Effect.objects.count() == expected


@pytest.mark.parametrize("code", [400, 404, 410, 422])
def test_definitive_4xx_is_stored_and_replayed(
    store_variant: str, client_a: Client, wallet: Wallet, code: int
) -> None:
    key = new_key()
    first = post(client_a, f"/t/outcome/?status={code}", key=key)
    again = post(client_a, f"/t/outcome/?status={code}", key=key)
    assert again.status_code == code
    assert again["Idempotent-Replayed"] == "true"
    assert again.content == first.content
    assert Effect.objects.count() == 1


def test_store_errors_option_keeps_5xx(client_a: Client, wallet: Wallet) -> None:
    key = new_key()
    with override_settings(IDEMPOTENCY={"STORE_ERRORS": True}):
        post(client_a, "/t/outcome/?status=502", key=key)
        again = post(client_a, "/t/outcome/?status=502", key=key)
    assert again.status_code == 502
    assert again["Idempotent-Replayed"] == "true"
    assert Effect.objects.count() == 1


def test_401_is_never_stored_even_with_store_errors(
    client_a: Client, wallet: Wallet, execution_log: Path
) -> None:
    key = new_key()
    with override_settings(IDEMPOTENCY={"STORE_ERRORS": True}):
        first = post(client_a, "/t/outcome/?status=401", key=key)
        again = post(client_a, "/t/outcome/?status=401", key=key)
    assert first.status_code == again.status_code == 401
    assert "Idempotent-Replayed" not in again
    assert executions(execution_log)[key] == 2  # the repeat ran: nothing was replayed
    assert not IdempotencyRecord.objects.filter(key=key).exists()  # released, not stored


def test_exception_releases_and_leaves_no_record(
    store_variant: str, client_a: Client, wallet: Wallet
) -> None:
    key = new_key()
    client_a.raise_request_exception = False
    first = post(client_a, "/t/outcome/?raise=1", key=key)
    assert first.status_code == 500
    store = get_store()
    scope = f"auth.user:{client_a.session['_auth_user_id']}"
    assert store.lookup(scope, key, fingerprint="any") is None
    if store_variant in ("db-atomic", "db-cached"):
        assert Effect.objects.count() == 0  # rolled back with the transaction
    ok = post(client_a, "/t/outcome/", key=key)
    assert ok.status_code == 201


def test_drf_validation_error_is_stored_as_problem(
    store_variant: str, client_a: Client, wallet: Wallet
) -> None:
    key = new_key()
    first = post(client_a, "/t/api/", {"invalid": True}, key)
    assert first.status_code == 400
    again = post(client_a, "/t/api/", {"invalid": True}, key)
    assert again["Idempotent-Replayed"] == "true"
    assert again.content == first.content
    missing = post(client_a, "/t/api/", {"missing": True}, new_key())
    assert missing.status_code == 404


def test_binary_body_replays_byte_for_byte_without_cookies(
    store_variant: str, client_a: Client, wallet: Wallet
) -> None:
    key = new_key()
    first = post(client_a, "/t/outcome/?binary=1&status=200", key=key)
    assert first.content == bytes(range(256)) * 4
    again = post(client_a, "/t/outcome/?binary=1&status=200", key=key)
    assert again.content == first.content
    assert again["Content-Type"] == "application/octet-stream"
    assert again["Content-Disposition"] == 'attachment; filename="blob.bin"'
    assert "session-ish" not in again.cookies
    assert "X-Request-Id" not in again


def test_viewset_update_destroy_and_action(
    store_variant: str, client_a: Client, wallet: Wallet
) -> None:
    created = post(client_a, "/t/viewset/", {"label": "a", "amount": 1}, new_key()).json()
    url = f"/t/viewset/{created['id']}/"
    key = new_key()
    bump1 = post(client_a, url + "bump/", {}, key)
    bump2 = post(client_a, url + "bump/", {}, key)
    assert bump2["Idempotent-Replayed"] == "true"
    assert bump1.content == bump2.content
    assert Effect.objects.get().amount == 2
    patch_key = new_key()
    body = json.dumps({"label": "b"})
    for _ in range(2):
        response = client_a.patch(url, data=body, content_type="application/json", **{H: patch_key})
        assert response.status_code == 200
    delete_key = new_key()
    first = client_a.delete(url, **{H: delete_key})
    again = client_a.delete(url, **{H: delete_key})
    assert first.status_code == again.status_code == 204
    assert again["Idempotent-Replayed"] == "true"


def test_signals_report_replay_mismatch_and_release(client_a: Client, wallet: Wallet) -> None:
    seen: list[str] = []

    def recorder(name: str) -> Any:
        def receive(**kwargs: Any) -> None:
            seen.append(name)

        return receive

    receivers = {name: recorder(name) for name in ("replayed", "mismatch", "released")}
    for name, receiver in receivers.items():
        getattr(signals, name).connect(receiver)
    try:
        key = new_key()
        post(client_a, "/t/api/", {"amount": 5}, key)
        post(client_a, "/t/api/", {"amount": 5}, key)
        post(client_a, "/t/api/", {"amount": 6}, key)
        post(client_a, "/t/outcome/?status=503", key=new_key())
    finally:
        for name, receiver in receivers.items():
            getattr(signals, name).disconnect(receiver)
    assert seen == ["replayed", "mismatch", "released"]


def test_recovery_points_resume_after_a_failure(client_a: Client, wallet: Wallet) -> None:
    from tests.testapp import views

    key = new_key()
    client_a.raise_request_exception = False
    views.SHIPPING_DOWN["down"] = True
    try:
        failed = post(client_a, "/t/phases/", {"amount": 5}, key)
        assert failed.status_code == 500
        assert Effect.objects.count() == 1  # phase one (the charge) committed
        again = post(client_a, "/t/phases/", {"amount": 5}, key)
        assert again.status_code == 500
        assert Effect.objects.count() == 1  # resumed after the charge: not charged twice
    finally:
        views.SHIPPING_DOWN["down"] = False
    done = post(client_a, "/t/phases/", {"amount": 5}, key)
    assert done.status_code == 201
    body = json.loads(done.content)
    assert body["steps"] == ["ship"] and body["resumed"] is True
    assert Effect.objects.count() == 1
    assert Wallet.objects.get().balance == 995
    replay = post(client_a, "/t/phases/", {"amount": 5}, key)
    assert replay["Idempotent-Replayed"] == "true"
    assert replay.content == done.content


def test_async_view_runs_once(client_a: Client, wallet: Wallet) -> None:
    key = new_key()
    first = post(client_a, "/t/async/", key=key)
    again = post(client_a, "/t/async/", key=key)
    assert first.status_code == 201
    assert again["Idempotent-Replayed"] == "true"
    assert again.content == first.content
    assert Effect.objects.count() == 1
