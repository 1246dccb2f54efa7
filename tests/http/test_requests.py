"""The Idempotency-Key header: sf-string and bare forms, and everything refused. Recovery
points: read and written through the keyed request's context, on Django's request and on
DRF's, which wraps it; refused outside a keyed request. (A real request resuming from its
recovery point: tests/contract/test_http.py.)"""

from __future__ import annotations

from typing import Any

import pytest
from django.test import RequestFactory
from hypothesis import given
from hypothesis import strategies as st

from idempotency.exceptions import ImproperlyApplied, KeyInvalid
from idempotency.http.requests import get_recovery_point, parse_key, recovery_point
from tests.support.drf import with_drf


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ("abc", "abc"),
        ('"abc"', "abc"),
        ("  abc\t", "abc"),
        ('"a b;c"', "a b;c"),
        ('"with \\"quote\\" and \\\\"', 'with "quote" and \\'),
        ("8e03978e-40d5-43e8-bc93-6894a57f9324", "8e03978e-40d5-43e8-bc93-6894a57f9324"),
        ("x" * 255, "x" * 255),
    ],
)
def test_accepted_forms(raw: str, key: str) -> None:
    assert parse_key(raw) == key


def test_absent_header_is_no_key() -> None:
    assert parse_key(None) is None


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "   ",
        '""',
        "x" * 256,
        '"' + "x" * 256 + '"',
        "a,b",  # a repeated header, as servers fold it
        '"a", "b"',
        '"abc"; p=1',
        '"unterminated',
        '"bad \\escape"',
        "caf\u00e9",
        "tab\tinside",
        'bare"quote',
        "new\nline",
    ],
)
def test_refused_forms(raw: str) -> None:
    with pytest.raises(KeyInvalid):
        parse_key(raw)


@given(st.text(max_size=300))
def test_any_value_parses_or_is_refused_cleanly(raw: str) -> None:
    try:
        key = parse_key(raw)
    except KeyInvalid:
        return
    assert key is not None
    assert 1 <= len(key) <= 255
    assert all(" " <= ch <= "~" for ch in key)


# -- parameters and the strict syntax (issue 20, item 6) --------------------------------


@pytest.mark.parametrize("raw", ['"abc";a=1', "abc;a=1", '"abc"; a', "abc;a", "a;b"])
def test_parameters_are_refused_alike_in_both_forms_by_default(raw: str) -> None:
    with pytest.raises(KeyInvalid, match="without parameters"):
        parse_key(raw)


def test_a_key_containing_a_semicolon_is_sent_quoted() -> None:
    assert parse_key('"a;b=1"') == "a;b=1"


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ('"abc"', "abc"),
        ('"abc";a=1', "abc"),
        ('"abc"; a=1;b', "abc"),
        ('"abc";q=0.5;t=tok;s="x,y";bin=:aGk=:;f=?0', "abc"),
        ('  "with \\"quote\\""  ', 'with "quote"'),
    ],
)
def test_strict_accepts_rfc_8941_strings_and_their_parameters(raw: str, key: str) -> None:
    assert parse_key(raw, strict=True) == key


@pytest.mark.parametrize(
    "raw",
    ["abc", "abc;a=1", '"abc";A=1', '"abc";a=', '"abc";a=@', '"abc", "def"', '"abc";a=1, "d"'],
)
def test_strict_refuses_everything_else(raw: str) -> None:
    with pytest.raises(KeyInvalid):
        parse_key(raw, strict=True)


def test_strict_is_the_key_syntax_setting() -> None:
    from django.test import override_settings

    assert parse_key("abc") == "abc"
    with override_settings(IDEMPOTENCY={"KEY_SYNTAX": "strict"}):
        with pytest.raises(KeyInvalid, match="quote it"):
            parse_key("abc")
        assert parse_key('"abc";a=1') == "abc"


@given(st.text(max_size=300))
def test_strict_parses_or_refuses_cleanly(raw: str) -> None:
    try:
        key = parse_key(raw, strict=True)
    except KeyInvalid:
        return
    assert key is not None and 1 <= len(key) <= 255


@pytest.mark.parametrize("url", with_drf(["/form/", "/async-form/"], ["/api-form/"]))
def test_key_syntax_over_http(client_a: object, url: str) -> None:
    import json

    from django.test import override_settings

    client: Any = client_a

    def status(raw: str) -> int:
        return int(client.post(url, HTTP_IDEMPOTENCY_KEY=raw).status_code)

    with override_settings(ROOT_URLCONF="tests.testapp.edge_urls"):
        assert status('"k1";a=1') == 400
        refused = client.post(url, HTTP_IDEMPOTENCY_KEY="k1;a=1")
        assert refused.status_code == 400
        assert json.loads(refused.content)["code"] == "idempotency-key-invalid"
        assert status("k2") == 201
        with override_settings(IDEMPOTENCY={"KEY_SYNTAX": "strict"}):
            assert status("k3") == 400
            assert status('"k3";a=1') == 201
            again = client.post(url, HTTP_IDEMPOTENCY_KEY='"k3"')  # the same key: replayed
            assert again["Idempotent-Replayed"] == "true"


# -- recovery points ------------------------------------------------------------------------


class Context:
    """What ``request.idempotency`` holds for the recovery point functions: the last point,
    and how a new one is saved."""

    def __init__(self) -> None:
        self.recovery_point, self.recovery_data = "", None

    def save_recovery_point(self, name: str, data: Any = None) -> None:
        self.recovery_point, self.recovery_data = name, data


def drf_request(request: Any) -> Any:
    """DRF's request, which wraps Django's."""
    from rest_framework.request import Request

    return Request(request)


#: How a view sees its request: Django's as it is, or DRF's wrapping it (where installed).
WRAPS = with_drf([pytest.param(lambda r: r, id="django")], [pytest.param(drf_request, id="drf")])


@pytest.mark.parametrize("wrap", WRAPS)
def test_a_point_saved_is_the_point_read_on_djangos_request_and_drfs(wrap: Any) -> None:
    request = RequestFactory().post("/")
    request.idempotency = Context()  # type: ignore[attr-defined]
    assert get_recovery_point(request) == ("", None)
    recovery_point(wrap(request), "charged", {"charge_id": 7})
    assert get_recovery_point(request) == ("charged", {"charge_id": 7})


@pytest.mark.parametrize("wrap", WRAPS)
def test_a_request_without_a_key_is_refused(wrap: Any) -> None:
    request = RequestFactory().post("/")
    with pytest.raises(ImproperlyApplied, match="not handled under an idempotency key"):
        recovery_point(request, "charged")
    with pytest.raises(ImproperlyApplied):
        get_recovery_point(wrap(request))
