"""Fingerprints: equal for the same request in another spelling, different otherwise."""

from __future__ import annotations

import json

from django.test import RequestFactory

from idempotency.fingerprints import request_fingerprint

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
