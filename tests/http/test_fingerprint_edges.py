"""Fingerprint edges (issue 20, items 3 and 4): requests that differ are refused, and
what changes between attempts of one operation (a re-rendered form's CSRF token, the
FINGERPRINT_EXCLUDE names) does not make a retry a different request."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.middleware.csrf import get_token
from django.test import Client, RequestFactory, override_settings

from idempotency.http.fingerprints import request_fingerprint
from tests.support.drf import with_drf
from tests.testapp import edge_views

rf = RequestFactory()
FORM = "application/x-www-form-urlencoded"
VIEWS = with_drf(["/form/", "/async-form/"], ["/api-form/"])


def fp(request: Any) -> str:
    return request_fingerprint(request, ())


@pytest.fixture
def client(client_a: Client) -> Any:
    edge_views.RUNS.clear()
    with override_settings(ROOT_URLCONF="tests.testapp.edge_urls"):
        yield client_a


# -- item 4: different requests are different ------------------------------------------


def test_repeated_form_values_keep_their_order() -> None:
    one = fp(rf.post("/x/", data="item=1&item=2", content_type=FORM))
    assert one != fp(rf.post("/x/", data="item=2&item=1", content_type=FORM))
    # names may still come in any order
    assert fp(rf.post("/x/", data="a=1&item=1&item=2", content_type=FORM)) == fp(
        rf.post("/x/", data="item=1&a=1&item=2", content_type=FORM)
    )


def test_repeated_query_values_keep_their_order() -> None:
    assert fp(rf.post("/x/?item=1&item=2")) != fp(rf.post("/x/?item=2&item=1"))
    assert fp(rf.post("/x/?a=1&item=1")) == fp(rf.post("/x/?item=1&a=1"))


def test_two_files_under_one_name_swapped_are_different() -> None:
    def upload(*contents: bytes) -> str:
        files = [SimpleUploadedFile(f"{c[:1].decode()}.txt", c) for c in contents]
        return fp(rf.post("/x/", data={"doc": files, "n": "1"}))

    assert upload(b"first", b"second") != upload(b"second", b"first")
    assert upload(b"first", b"second") == upload(b"first", b"second")


def test_two_malformed_multipart_bodies_are_different() -> None:
    """A body the multipart parser refuses is hashed from its bytes, so another malformed
    body under the same key is a different request (422), not a replay of the first."""

    def broken(body: bytes) -> str:  # no boundary: Django's parser raises
        return fp(rf.post("/x/", data=body, content_type="multipart/form-data"))

    first = broken(b"garbage one")
    assert first != broken(b"garbage two")
    assert first == broken(b"garbage one")


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("12345678901234567.1", "12345678901234567.2"),
        ("1e400", "2e400"),
        ("0.1000000000000000055511151231257827", "0.1"),
        ("123456789012345678901234567890", "123456789012345678901234567891"),
    ],
)
def test_json_numbers_are_hashed_from_their_exact_text(a: str, b: str) -> None:
    def body(number: str) -> str:
        return fp(rf.post("/x/", data=f'{{"amount": {number}}}', content_type="application/json"))

    assert body(a) != body(b)
    assert body(a) == fp(
        rf.post("/x/", data=f'{{ "amount" :{a} }}', content_type="application/json")
    )


def test_a_number_is_not_the_string_of_its_digits() -> None:
    as_number = rf.post("/x/", data='{"a": 1.5}', content_type="application/json")
    as_string = rf.post("/x/", data='{"a": "1.5"}', content_type="application/json")
    assert fp(as_number) != fp(as_string)


def _post_form(client: Client, url: str, key: str, body: str) -> Any:
    return client.post(url, data=body, content_type=FORM, HTTP_IDEMPOTENCY_KEY=key)


@pytest.mark.parametrize("url", VIEWS)
def test_reordered_repeated_values_are_refused_over_http(client: Client, url: str) -> None:
    key = str(uuid.uuid4())
    assert _post_form(client, url, key, "item=1&item=2").status_code == 201
    again = _post_form(client, url, key, "item=1&item=2")
    assert again["Idempotent-Replayed"] == "true"
    assert _post_form(client, url, key, "item=2&item=1").status_code == 422
    assert (
        client.post(f"{url}?q=1&q=2", HTTP_IDEMPOTENCY_KEY=(k := str(uuid.uuid4()))).status_code
        == 201
    )
    assert client.post(f"{url}?q=2&q=1", HTTP_IDEMPOTENCY_KEY=k).status_code == 422
    assert edge_views.RUNS[url] == 2


@pytest.mark.parametrize("url", VIEWS)
def test_swapped_files_are_refused_over_http(client: Client, url: str) -> None:
    def send(*contents: bytes) -> Any:
        files = [SimpleUploadedFile(f"{c[:1].decode()}.bin", c) for c in contents]
        return client.post(url, data={"doc": files}, HTTP_IDEMPOTENCY_KEY=key)

    key = str(uuid.uuid4())
    assert send(b"a" * 10, b"b" * 20).status_code == 201
    assert send(b"a" * 10, b"b" * 20)["Idempotent-Replayed"] == "true"
    assert send(b"b" * 20, b"a" * 10).status_code == 422
    assert edge_views.RUNS[url] == 1


# -- item 3: what changes between attempts of one operation ----------------------------


def _csrf_form(client: Client) -> tuple[str, str]:
    """Two renderings of one form: two masked tokens for the same CSRF secret."""
    request = rf.get("/")
    first = get_token(request)
    second = get_token(request)  # noqa: F841 - masked again: a new string
    request2 = rf.get("/")
    request2.COOKIES = request.COOKIES
    request2.META["CSRF_COOKIE"] = request.META["CSRF_COOKIE"]
    rerendered = get_token(request2)
    assert first != rerendered
    client.cookies["csrftoken"] = request.META["CSRF_COOKIE"]
    return first, rerendered


@pytest.mark.parametrize("url", VIEWS)
def test_a_re_rendered_form_replays(client: Client, url: str) -> None:
    first, rerendered = _csrf_form(client)
    key = str(uuid.uuid4())
    one = _post_form(client, url, key, f"amount=5&csrfmiddlewaretoken={first}")
    two = _post_form(client, url, key, f"amount=5&csrfmiddlewaretoken={rerendered}")
    assert one.status_code == 201
    assert two["Idempotent-Replayed"] == "true"
    assert two.content == one.content
    assert _post_form(client, url, key, f"amount=6&csrfmiddlewaretoken={first}").status_code == 422
    assert edge_views.RUNS[url] == 1


def test_a_re_rendered_multipart_form_replays(client: Client) -> None:
    first, rerendered = _csrf_form(client)
    key = str(uuid.uuid4())

    def send(token: str) -> Any:
        data = {"csrfmiddlewaretoken": token, "doc": SimpleUploadedFile("a.txt", b"x")}
        return client.post("/form/", data=data, HTTP_IDEMPOTENCY_KEY=key)

    assert send(first).status_code == 201
    assert send(rerendered)["Idempotent-Replayed"] == "true"


@pytest.mark.parametrize("url", VIEWS)
def test_fingerprint_exclude_leaves_out_fields_and_query_parameters(
    client: Client, url: str
) -> None:
    key = str(uuid.uuid4())
    with override_settings(IDEMPOTENCY={"FINGERPRINT_EXCLUDE": ["sent_at", "nonce"]}):
        one = client.post(
            f"{url}?nonce=1",
            data="amount=5&sent_at=1",
            content_type=FORM,
            HTTP_IDEMPOTENCY_KEY=key,
        )
        two = client.post(
            f"{url}?nonce=2",
            data="sent_at=2&amount=5",
            content_type=FORM,
            HTTP_IDEMPOTENCY_KEY=key,
        )
        other = client.post(
            f"{url}?nonce=3",
            data="amount=6&sent_at=3",
            content_type=FORM,
            HTTP_IDEMPOTENCY_KEY=key,
        )
    assert one.status_code == 201
    assert two["Idempotent-Replayed"] == "true"
    assert other.status_code == 422


def test_fingerprint_exclude_applies_to_top_level_json_keys() -> None:
    def body(value: dict[str, Any]) -> str:
        return fp(rf.post("/x/", data=json.dumps(value), content_type="application/json"))

    with override_settings(IDEMPOTENCY={"FINGERPRINT_EXCLUDE": ["sent_at"]}):
        assert body({"amount": 5, "sent_at": 1}) == body({"amount": 5, "sent_at": 2})
        assert body({"amount": 5, "sent_at": 1}) != body({"amount": 6, "sent_at": 1})
        # only the top level: a nested field of that name is part of the request
        assert body({"x": {"sent_at": 1}}) != body({"x": {"sent_at": 2}})
    assert body({"amount": 5, "sent_at": 1}) != body({"amount": 5, "sent_at": 2})
