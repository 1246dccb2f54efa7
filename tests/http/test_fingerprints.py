"""Fingerprints: equal for the same request in another spelling, different otherwise (as
DRF's views read their requests: tests/contrib/drf/test_mixins.py)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from django.test import RequestFactory, override_settings

from idempotency.http.fingerprints import (
    canonical_bytes,
    older_request_fingerprints,
    request_digest,
    request_fingerprint,
)
from tests.support.drf import with_drf
from tests.support.http import multipart

rf = RequestFactory()


def fp(request: object, headers: tuple[str, ...] = ()) -> str:
    return request_fingerprint(request, headers)  # type: ignore[arg-type]


def test_json_key_order_and_spacing_do_not_matter() -> None:
    a = rf.post("/x/", data='{"a": 1, "b": [1, 2]}', content_type="application/json")
    b = rf.post("/x/", data='{"b":[1,2],"a":1}', content_type="application/json")
    assert fp(a) == fp(b)


def test_json_values_matter() -> None:
    a = rf.post("/x/", data={"a": 1}, content_type="application/json")
    b = rf.post("/x/", data={"a": 2}, content_type="application/json")
    assert fp(a) != fp(b)


def test_method_path_and_query_matter_and_query_order_does_not() -> None:
    body = json.dumps({"a": 1})
    base = fp(rf.post("/x/?p=1&q=2", data=body, content_type="application/json"))
    assert base == fp(rf.post("/x/?q=2&p=1", data=body, content_type="application/json"))
    assert base != fp(rf.post("/y/?p=1&q=2", data=body, content_type="application/json"))
    assert base != fp(rf.put("/x/?p=1&q=2", data=body, content_type="application/json"))
    assert base != fp(rf.post("/x/?p=1&q=3", data=body, content_type="application/json"))


def test_form_fields_are_sorted() -> None:
    ctype = "application/x-www-form-urlencoded"
    a = rf.post("/x/", data="a=1&b=2", content_type=ctype)
    b = rf.post("/x/", data="b=2&a=1", content_type=ctype)
    assert fp(a) == fp(b)


def test_multipart_boundary_does_not_matter_but_file_content_does() -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    a = rf.post("/x/", data={"f": SimpleUploadedFile("a.txt", b"hello"), "n": "1"})
    b = rf.post("/x/", data={"n": "1", "f": SimpleUploadedFile("a.txt", b"hello")})
    c = rf.post("/x/", data={"n": "1", "f": SimpleUploadedFile("a.txt", b"HELLO")})
    assert fp(a) == fp(b)
    assert fp(a) != fp(c)


def test_raw_bytes_and_invalid_json_hash_as_bytes() -> None:
    a = rf.post("/x/", data=b"\x00\x01", content_type="application/octet-stream")
    b = rf.post("/x/", data=b"\x00\x02", content_type="application/octet-stream")
    bad = rf.post("/x/", data=b"{not json", content_type="application/json")
    assert fp(a) != fp(b)
    assert len(fp(bad)) == 64


def test_configured_headers_join_the_fingerprint() -> None:
    a = rf.post("/x/", data={}, content_type="application/json", HTTP_X_TENANT="1")
    b = rf.post("/x/", data={}, content_type="application/json", HTTP_X_TENANT="2")
    assert fp(a) == fp(b)
    assert fp(a, ("X-Tenant",)) != fp(b, ("X-Tenant",))


def test_put_patch_delete_forms_are_fingerprinted_from_the_raw_body() -> None:
    # Django parses request.POST only for POST: these must not look like an empty form
    ctype = "application/x-www-form-urlencoded"
    for method in ("put", "patch", "delete"):
        small = getattr(rf, method)("/x/", data="amount=1", content_type=ctype)
        large = getattr(rf, method)("/x/", data="amount=999", content_type=ctype)
        assert fp(small) != fp(large), method
        reordered = getattr(rf, method)("/x/", data="b=2&amount=1", content_type=ctype)
        assert fp(reordered) == fp(
            getattr(rf, method)("/x/", data="amount=1&b=2", content_type=ctype)
        )


def test_put_multipart_is_fingerprinted_whatever_the_boundary() -> None:
    def put(boundary: str, parts: list[tuple[str, str]]) -> str:
        return fp(
            rf.put(
                "/x/",
                data=multipart(boundary, parts),
                content_type=f"multipart/form-data; boundary={boundary}",
            )
        )

    one = put("aaa111", [("amount", "1"), ("note", "x")])
    assert one == put("zzz999", [("note", "x"), ("amount", "1")])
    assert one != put("aaa111", [("amount", "999"), ("note", "x")])


def test_the_media_type_is_part_of_the_fingerprint() -> None:
    as_json = rf.post("/x/", data='[["a","1"]]', content_type="application/json")
    as_form = rf.post("/x/", data="a=1", content_type="application/x-www-form-urlencoded")
    assert fp(as_json) != fp(as_form)
    text = rf.post("/x/", data=b"same", content_type="text/plain")
    octets = rf.post("/x/", data=b"same", content_type="application/octet-stream")
    assert fp(text) != fp(octets)
    # parameters are not part of it, but for a charset other than UTF-8 (below)
    utf8 = rf.post("/x/", data="{}", content_type="application/json; charset=utf-8")
    assert fp(utf8) == fp(rf.post("/x/", data="{}", content_type="application/json"))
    boundary = rf.post("/x/", data="{}", content_type="application/json; v=2")
    assert fp(boundary) == fp(rf.post("/x/", data="{}", content_type="application/json"))


FORM = "application/x-www-form-urlencoded"


def test_the_charset_the_body_is_read_by_is_part_of_the_fingerprint() -> None:
    """Issue 43, finding 5: ``label=%E9`` is "é" read as ISO-8859-1 and "\ufffd" read as
    UTF-8 (Django's request.encoding, DRF's parsers), yet both had one fingerprint."""
    body = "label=%E9&amount=1"
    latin1 = fp(rf.post("/x/", data=body, content_type=f"{FORM}; charset=ISO-8859-1"))
    utf8 = fp(rf.post("/x/", data=body, content_type=f"{FORM}; charset=utf-8"))
    assert latin1 != utf8
    # one charset in other spellings is one request; UTF-8 is the default charset
    assert latin1 == fp(rf.post("/x/", data=body, content_type=f'{FORM}; charset="latin-1"'))
    assert utf8 == fp(rf.post("/x/", data=body, content_type=f"{FORM};charset=UTF8"))
    assert utf8 == fp(rf.post("/x/", data=body, content_type=FORM))
    with override_settings(DEFAULT_CHARSET="iso-8859-1"):  # what a request without one is read by
        assert fp(rf.post("/x/", data=body, content_type=FORM)) == latin1
    # a charset Python does not know is read as DEFAULT_CHARSET (request.encoding is None)
    unknown = rf.post("/x/", data=body, content_type=FORM)
    unknown.META["CONTENT_TYPE"] = f"{FORM}; charset=x-unknown"  # RequestFactory encodes by it
    unknown.encoding = None  # as Django leaves it for an unknown charset
    assert fp(unknown) == utf8


def test_deeply_nested_json_falls_back_to_the_raw_bytes() -> None:
    from idempotency.http.fingerprints import MAX_JSON_DEPTH, json_depth

    deep = b'{"amount": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    assert json_depth(deep) == 5001
    a = rf.post("/x/", data=deep, content_type="application/json")
    b = rf.post("/x/", data=deep.replace(b": ", b":"), content_type="application/json")
    assert len(fp(a)) == 64
    assert fp(a) != fp(b)  # raw bytes: spacing counts past the bound
    shallow = b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH
    spaced = b"[ " * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH
    assert fp(rf.post("/x/", data=shallow, content_type="application/json")) == fp(
        rf.post("/x/", data=spaced, content_type="application/json")
    )


def test_a_consumed_stream_falls_back_to_the_parsed_form() -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    def parsed_first(data: dict[str, object]) -> str:
        request = rf.post("/x/", data=data)
        request.POST  # noqa: B018 - Django's multipart parser consumes the stream
        return fp(request)

    one = parsed_first({"n": "1", "f": SimpleUploadedFile("a.txt", b"hello")})
    assert one == parsed_first({"f": SimpleUploadedFile("a.txt", b"hello"), "n": "1"})
    assert one != parsed_first({"n": "2", "f": SimpleUploadedFile("a.txt", b"hello")})
    assert one != parsed_first({"n": "1", "f": SimpleUploadedFile("a.txt", b"HELLO")})


J = "application/json"
#: Digests of this release. A stored record keeps its request's fingerprint, so a change
#: to any of these would answer a retry sent across an upgrade with 422: change one only
#: on purpose, with a note in the changelog.
STABLE = [
    ("json", "4e192241d34d4d5c79e822ccc4b3833d55234b0bc474d6429d9a2af909722fc3"),
    ("json-nested", "9c1fbba2642e0627d92bb9cb4980f2d743108b06fee5a4a409b06cc09d67bfa1"),
    ("json-csrf", "9b94ce8801d2d6782272875dede18e7a12d865ed84ca470887d069baa425b9f1"),
    ("json-utf16", "a4693698ede44e62dfd4281b821c415ecc183bd500511be553f7f4fe39afd60a"),
    ("json-bom", "bab17f50f403cfcff686695c687c40919a8160b38e1e9b8cc1588f1c598426c0"),
    ("json-problem", "c95f0fd9ae5d89a0c2362cbecad4fb5274961a0966c821d65d8166030a5e02cc"),
    ("json-invalid", "edb93458fb014e19ee5b1b1b29cb16a02b32ee7b56248d974a35efb10b0a55ff"),
    ("json-scalar", "cfc067a7dfbc851552d25780fb81aed2f4a422503a9a8c5ca8f5db52393e594b"),
    ("form", "0167ce2f4f7e4da5deeaa4faec24eb41a34f776b8d1d1b96bc7ddb4198f2355d"),
    ("raw", "36b2372def0c18ef0d192b807101419ae98f16f7f2238d7a66167266e8235884"),
    ("empty", "0aa45bb5bf125a3bff04b31c26efceff74bc5fd5714d0000d590c5e5cb3b2dce"),
    ("headers", "4773fadde0aba2a61084178e211aac08e8ecc1fbf507d02348f27f4b95444aca"),
    ("multipart", "633da7ab21ab9549c0f0acd895424cf86085bec5ebaba39bc938cc654b0d26ed"),
]


def stable_request(name: str) -> tuple[Any, tuple[str, ...]]:
    from django.core.files.uploadedfile import SimpleUploadedFile

    nested = (
        '{"z": [1, {"y": null, "x": true}], "a": "\\u00e9\\u2603", "n": 1.50,'
        ' "big": 12345678901234567.1, "e": 1e400}'
    )
    form = "application/x-www-form-urlencoded"
    requests = {
        "json": lambda: rf.post("/orders/", data='{"amount": 1, "memo": "bench"}', content_type=J),
        "json-nested": lambda: rf.post("/orders/?b=2&a=1&a=0", data=nested, content_type=J),
        "json-csrf": lambda: rf.put(
            "/orders/7/", data='{"csrfmiddlewaretoken": "x", "a": [1, 2]}', content_type=J
        ),
        "json-utf16": lambda: rf.post(
            "/orders/", data='{"a": "\u00e9"}'.encode("utf-16"), content_type=J
        ),
        "json-bom": lambda: rf.post("/orders/", data=b'\xef\xbb\xbf{"a": 1}', content_type=J),
        "json-problem": lambda: rf.post(
            "/orders/", data="[1, 2]", content_type="application/problem+json; charset=utf-8"
        ),
        "json-invalid": lambda: rf.post("/orders/", data='{"a": ', content_type=J),
        "json-scalar": lambda: rf.patch("/orders/7/", data='  "text"  ', content_type=J),
        "form": lambda: rf.post(
            "/orders/", data="b=2&a=1&a=0&csrfmiddlewaretoken=t", content_type=form
        ),
        "raw": lambda: rf.post(
            "/orders/", data=b"\x00\x01\xff", content_type="application/octet-stream"
        ),
        "empty": lambda: rf.delete("/orders/7/"),
        "headers": lambda: rf.post(
            "/orders/", data='{"a": 1}', content_type=J, HTTP_X_TENANT="acme"
        ),
        "multipart": lambda: rf.post(
            "/orders/?z=1&a=\u00e9",
            data={"n": ["2", "1"], "f": SimpleUploadedFile("a.txt", b"hello", "text/plain")},
        ),
    }
    headers = ("X-Tenant", "X-Missing") if name == "headers" else ()
    return requests[name](), headers


@pytest.mark.parametrize(("name", "digest"), STABLE)
def test_fingerprints_are_stable_across_releases(name: str, digest: str) -> None:
    """The material under the keyed hash is stable (its unkeyed digest, which records
    before keyed fingerprints stored, is what older_request_fingerprints accepts)."""
    request, headers = stable_request(name)
    assert request_digest(request, headers).hex() == digest
    request, headers = stable_request(name)
    assert fp(request, headers) != digest
    request, headers = stable_request(name)
    assert older_request_fingerprints(request, headers) == [digest]


# -- issue 36, findings 5 and 10: keyed fingerprints, an injective canonical form ------------


def test_the_number_and_an_object_spelling_it_are_two_requests() -> None:
    """Finding 10: ``1.5`` and ``{"\\u0000number": "1.5"}`` shared one fingerprint."""
    number = canonical_bytes(J, b"1.5")
    spelled = canonical_bytes(J, b'{"\\u0000number": "1.5"}')
    assert number != spelled
    nested = canonical_bytes(J, b'{"a": 1.5}')
    assert nested != canonical_bytes(J, b'{"a": {"\\u0000number": "1.5"}}')
    # NUL-led keys stay distinct among themselves, and still ignore order and spacing
    one, two = b'{"\\u0000a": 1, "\\u0000\\u0000a": 2}', b'{"\\u0000\\u0000a":2,"\\u0000a":1}'
    assert canonical_bytes(J, one) == canonical_bytes(J, two)
    assert canonical_bytes(J, one) != canonical_bytes(J, b'{"\\u0000a": 2, "\\u0000\\u0000a": 1}')


@pytest.mark.django_db
def test_the_colliding_bodies_are_refused_over_http(client_a: Any, wallet: Any) -> None:
    key = str(uuid.uuid4())
    first = client_a.post("/t/function/", data="1.5", content_type=J, HTTP_IDEMPOTENCY_KEY=key)
    other = client_a.post(
        "/t/function/",
        data='{"\\u0000number": "1.5"}',
        content_type=J,
        HTTP_IDEMPOTENCY_KEY=key,
    )
    assert first.status_code == 201
    assert other.status_code == 422  # before: the first one's 201, replayed


def _json_values() -> Any:
    from hypothesis import strategies as st

    keys = st.one_of(
        st.sampled_from(["\x00number", "\x00\x00number", "\x00", "a", "1.5", "$float"]),
        st.text(max_size=4),
    )
    numbers = st.one_of(
        st.integers(),
        st.floats(allow_nan=False, allow_infinity=False),
        st.sampled_from([1.5, -0.0, 0.0, 1.0, 1e300]),
    )
    strings = st.one_of(st.sampled_from(["1.5", "1", "-0.0", "\x00number"]), st.text(max_size=4))
    scalars = st.one_of(st.none(), st.booleans(), numbers, strings)
    return st.recursive(
        scalars,
        lambda children: st.one_of(
            st.lists(children, max_size=3), st.dictionaries(keys, children, max_size=3)
        ),
        max_leaves=8,
    )


def _same_json(a: Any, b: Any) -> bool:
    """Whether two values are one JSON value (Python's ``1 == 1.0 == True`` is not)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def test_distinct_json_values_never_share_a_canonical_form() -> None:
    from hypothesis import example, given, settings

    @settings(max_examples=400, deadline=None)
    @given(a=_json_values(), b=_json_values())
    @example(a=1.5, b={"\x00number": "1.5"})
    @example(a={"k": 1.5}, b={"k": {"\x00number": "1.5"}})
    @example(a={"\x00number": 1}, b={"\x00\x00number": 1})
    def distinct(a: Any, b: Any) -> None:
        first = canonical_bytes(J, json.dumps(a).encode())
        second = canonical_bytes(J, json.dumps(b).encode())
        assert (first == second) == _same_json(a, b)

    @settings(max_examples=200, deadline=None)
    @given(a=_json_values())
    def respelled(a: Any) -> None:
        # the same value in another spelling (key order, spacing) is the same request
        compact = json.dumps(a, separators=(",", ":")).encode()
        spaced = json.dumps(a, indent=2, sort_keys=True).encode()
        assert canonical_bytes(J, compact) == canonical_bytes(J, spaced)

    distinct()
    respelled()


def test_a_stored_fingerprint_gives_no_oracle_on_the_body() -> None:
    """Finding 5: from one stored fingerprint of {"pan", "cvv"}, the CVV was recovered by
    hashing the 1000 candidates the unkeyed way; keyed, no candidate matches."""
    card = '{"pan": "4111111111111111", "cvv": "%s"}'
    stored = fp(rf.post("/pay/", data=card % "737", content_type=J))
    found = [
        cvv
        for cvv in (f"{n:03d}" for n in range(1000))
        if request_digest(rf.post("/pay/", data=card % cvv, content_type=J)).hex() == stored
    ]
    assert found == []
    # and the fingerprint depends on the server secret
    with override_settings(SECRET_KEY="another-secret-of-fifty-characters-or-more-0123456789"):
        assert fp(rf.post("/pay/", data=card % "737", content_type=J)) != stored


STORES = ["db-atomic", "db-lease", pytest.param("redis", marks=pytest.mark.redis), "cache"]


#: callers whose identity does not hang on SECRET_KEY (a session's data is signed with
#: it): an anonymous caller of a plain view of a shared scope, and DRF's token caller of
#: an @api_view where DRF is installed
ROTATION_CALLERS = with_drf(
    [pytest.param("/e/upload/", False, id="plain-shared")],
    [pytest.param("/t/api-view/", True, id="drf-token")],
)


@pytest.mark.django_db
@pytest.mark.parametrize(("url", "token"), ROTATION_CALLERS)
@pytest.mark.parametrize("store", STORES)
def test_records_under_an_older_secret_still_replay(
    user: Any, wallet: Any, store: str, url: str, token: bool
) -> None:
    """Rotation (SECRET_KEY_FALLBACKS, FINGERPRINT_SECRETS): the retry of a record made
    under the secret before replays, not 422. Without the old SECRET_KEY the record's
    tag verifies under no key (issue 43): refused as forged, and nothing runs."""
    from django.test import Client

    from tests.support.stores import STORE_VARIANTS
    from tests.support.users import token_client

    old, new = "old-secret-" + "o" * 50, "new-secret-" + "n" * 50
    body = '{"amount": 3}'

    client = token_client(user) if token else Client()  # no session (ROTATION_CALLERS)

    def post(key: str) -> Any:
        return client.post(url, data=body, content_type=J, HTTP_IDEMPOTENCY_KEY=key)

    variants = STORE_VARIANTS[store]
    for before, after, replays in (
        ({"SECRET_KEY": old}, {"SECRET_KEY": new, "SECRET_KEY_FALLBACKS": [old]}, True),
        ({"SECRET_KEY": old}, {"SECRET_KEY": new}, False),
        (
            {"IDEMPOTENCY": {**variants, "FINGERPRINT_SECRETS": ["a" * 40]}},
            {"IDEMPOTENCY": {**variants, "FINGERPRINT_SECRETS": ["b" * 40, "a" * 40]}},
            True,
        ),
    ):
        key = str(uuid.uuid4())
        with override_settings(**{"IDEMPOTENCY": variants, **before}):
            first = post(key)
        with override_settings(**{"IDEMPOTENCY": variants, **after}):
            again = post(key)
        assert first.status_code == 201
        if replays:
            assert again.status_code == 201 and again.content == first.content
            assert again["Idempotent-Replayed"] == "true"
        else:
            assert again.status_code == 500
            assert json.loads(again.content)["code"] == "idempotency-record-forged"


@pytest.mark.django_db
@pytest.mark.parametrize("store", STORES)
def test_records_stored_unkeyed_before_the_upgrade_replay_while_accepted(
    client_a: Any, user: Any, wallet: Any, store: str
) -> None:
    from idempotency.conf import idempotency_settings
    from idempotency.stores.base import StoredResponse, get_store
    from tests.support.stores import STORE_VARIANTS

    body = '{"amount": 4}'
    request = rf.post("/t/function/", data=body, content_type=J)
    request.user = user
    legacy = request_digest(request).hex()  # what the version before stored
    stored = StoredResponse(201, [("Content-Type", "application/json")], b'{"id": "before"}')
    for accept, status in ((True, 201), (False, 422)):
        key = str(uuid.uuid4())
        settings = {**STORE_VARIANTS[store], "FINGERPRINT_ACCEPT_UNKEYED": accept}
        with override_settings(IDEMPOTENCY=settings):
            records = get_store()
            scope = idempotency_settings.imported("SCOPE")(request)
            claim = records.claim(scope, key, fingerprint=legacy, lease=30, ttl=300)
            assert records.complete(scope, key, fence=claim.fence, response=stored, ttl=300)
            again = client_a.post(
                "/t/function/", data=body, content_type=J, HTTP_IDEMPOTENCY_KEY=key
            )
        assert again.status_code == status
        if accept:
            assert again.content == b'{"id": "before"}'
