"""The OpenAPI schema documents the Idempotency-Key contract, with no annotation on any view.

The sample's schema is generated and validated by drf-spectacular, every protected
sample operation carries the header and the problem responses (and nothing else
does), the four ways of protecting a view (decorator, ``@api_view``, mixin,
middleware) are each recognised, and the docs page renders in a real browser.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings
from django.urls import path
from drf_spectacular.drainage import GENERATOR_STATS
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.validation import validate_schema
from playwright.sync_api import Page, expect
from rest_framework.response import Response
from rest_framework.views import APIView

from idempotency import idempotency_exempt, idempotent
from idempotency.contrib.openapi import EXPIRY_EXTENSION
from idempotency.contrib.openapi.spectacular import KEY_PATTERNS
from tests.support.services import ROOT
from tests.testapp import drf_views

SCREENSHOT = ROOT / "docs" / "screenshots" / "api-docs.png"

#: Every sample operation protected by a key: (path, method) -> key required.
PROTECTED = {
    ("/api/accounts/me/deposit/", "post"): True,
    ("/api/orders/", "post"): False,
    ("/api/orders/{id}/pay/", "post"): True,
}
SUBMIT_TOKEN = {("/api/orders/checkout/", "post")}


def schema(**kwargs: Any) -> dict[str, Any]:
    generated: dict[str, Any] = SchemaGenerator(**kwargs).get_schema(request=None, public=True)
    return generated


def operations(document: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (route, method): operation
        for route, item in document["paths"].items()
        for method, operation in item.items()
    }


def header(operation: dict[str, Any], name: str) -> dict[str, Any] | None:
    for parameter in operation.get("parameters", []):
        if parameter["in"] == "header" and parameter["name"] == name:
            return dict(parameter)
    return None


def assert_documents_the_key(operation: dict[str, Any], *, required: bool) -> None:
    key = header(operation, "Idempotency-Key")
    assert key is not None
    assert key["required"] is required
    assert key["schema"] == {
        "type": "string",
        "minLength": 1,
        "maxLength": 512,
        "pattern": KEY_PATTERNS["lenient"],
    }
    responses = operation["responses"]
    successes = [code for code in responses if code.startswith("2")]
    assert successes
    for code in successes:
        assert "Idempotent-Replayed" in responses[code]["headers"]
    for code in ("400", "403", "409", "410", "413", "422", "503"):
        content = responses[code]["content"]["application/problem+json"]
        assert content["schema"] == {"$ref": "#/components/schemas/IdempotencyProblem"}
    assert "Retry-After" in responses["409"]["headers"]
    assert "Retry-After" in responses["503"]["headers"]
    assert "idempotency-key-mismatch" in responses["422"]["description"]
    assert "idempotency-response-not-stored" in responses["410"]["description"]
    assert "idempotency-anonymous-not-allowed" in responses["403"]["description"]
    for code in ("idempotency-store-unavailable", "idempotency-store-misconfigured"):
        assert code in responses["503"]["description"]


def test_the_sample_schema_is_valid_openapi() -> None:
    GENERATOR_STATS.reset()
    document = schema()
    validate_schema(document)  # drf-spectacular's validation against the OpenAPI 3 spec
    # and no warning either (CI runs `spectacular --validate --fail-on-warn`)
    assert not GENERATOR_STATS, dict(GENERATOR_STATS._warn_cache)
    deposit = document["components"]["schemas"]["AccountDepositInput"]
    assert deposit["properties"]["amount"]["type"] == "string"  # money is never a float
    problem = document["components"]["schemas"]["IdempotencyProblem"]
    assert set(problem["required"]) == {"type", "title", "status", "detail", "code"}


def test_every_protected_sample_operation_documents_the_key() -> None:
    found = operations(schema())
    for (route, method), required in PROTECTED.items():
        assert_documents_the_key(found[(route, method)], required=required)
    documented = {op for op, operation in found.items() if header(operation, "Idempotency-Key")}
    assert documented == set(PROTECTED)  # and no other operation claims to take a key
    assert "Idempotent-Replayed" not in str(found[("/api/orders/{id}/ship/", "post")])


def test_submit_token_operations_document_the_token() -> None:
    found = operations(schema())
    for op in SUBMIT_TOKEN:
        operation = found[op]
        token = header(operation, "X-Submit-Token")
        assert token is not None and token["required"] is True
        assert "submit-token-used" in operation["responses"]["409"]["description"]
        assert "application/problem+json" in operation["responses"]["409"]["content"]
    documented = {op for op, operation in found.items() if header(operation, "X-Submit-Token")}
    assert documented == SUBMIT_TOKEN


def test_decorator_api_view_and_mixin_views_are_recognised() -> None:
    found = operations(schema(urlconf="tests.testapp.urls"))
    assert_documents_the_key(found[("/api/", "post")], required=False)  # @idempotent method
    assert_documents_the_key(found[("/api-view/", "post")], required=False)  # below @api_view
    for op in [
        ("/viewset/", "post"),
        ("/viewset/{id}/", "put"),
        ("/viewset/{id}/", "patch"),
        ("/viewset/{id}/", "delete"),
        ("/viewset/{id}/bump/", "post"),
    ]:
        assert_documents_the_key(found[op], required=False)  # IdempotentMixin
    for op in [("/viewset/", "get"), ("/plain-api/", "post")]:
        assert header(found[op], "Idempotency-Key") is None


@override_settings(IDEMPOTENCY={"REQUIRED": True})
def test_the_required_setting_is_documented() -> None:
    found = operations(schema(urlconf="tests.testapp.urls"))
    assert_documents_the_key(found[("/api/", "post")], required=True)


def test_the_key_publishes_its_expiry() -> None:
    """The IETF draft asks a resource to publish its expiry policy: in words, and in
    seconds as an extension a client can read."""
    key = header(operations(schema())[("/api/orders/", "post")], "Idempotency-Key")
    assert key is not None and key[EXPIRY_EXTENSION] == 86400  # the TTL setting's default
    assert "kept for 24 hours (86400 s) after the first request completes" in key["description"]
    assert "4xx" not in key["description"]  # 4xx answers are kept as long (ERROR_TTL None)


class ShortLivedApi(APIView):
    @idempotent(ttl=600, error_ttl=0)
    def post(self, request: Any) -> Response:
        return Response({}, status=201)


@override_settings(IDEMPOTENCY={"TTL": 7200, "ERROR_TTL": 90})
def test_a_views_ttl_and_the_settings_expiry_are_published() -> None:
    patterns = [
        path("short/", ShortLivedApi.as_view()),
        path("api/", drf_views.EffectApi.as_view()),
    ]
    found = operations(schema(patterns=patterns))
    short = header(found[("/short/", "post")], "Idempotency-Key")
    assert short is not None and short[EXPIRY_EXTENSION] == 600
    assert "kept for 10 minutes (600 s)" in short["description"]
    assert "A 4xx answer is not kept" in short["description"]
    settled = header(found[("/api/", "post")], "Idempotency-Key")
    assert settled is not None and settled[EXPIRY_EXTENSION] == 7200
    assert "kept for 2 hours (7200 s)" in settled["description"]
    assert "A 4xx answer is kept for 90 seconds (90 s)." in settled["description"]


class ExemptApi(APIView):
    idempotency_exempt = True

    def post(self, request: Any) -> Response:
        return Response({})


@pytest.mark.parametrize(
    "middleware_path",
    [
        "idempotency.IdempotencyMiddleware",  # what the README lists
        "idempotency.http.middleware.IdempotencyMiddleware",
    ],
)
def test_the_middleware_protects_every_view_but_the_exempt_ones(
    settings: Any, middleware_path: str
) -> None:
    settings.MIDDLEWARE = [*settings.MIDDLEWARE, middleware_path]
    patterns = [
        path("plain-api/", drf_views.PlainApi.as_view()),
        path("exempt-api/", idempotency_exempt(ExemptApi).as_view()),
    ]
    found = operations(schema(patterns=patterns))
    assert_documents_the_key(found[("/plain-api/", "post")], required=False)
    assert header(found[("/exempt-api/", "post")], "Idempotency-Key") is None


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_docs_page_in_a_real_browser(page: Page, live_server: Any, tmp_path: Path) -> None:
    page.goto(f"{live_server.url}/api/docs/")
    # Swagger UI's own script and styles come from this server, never from a CDN
    sources = page.evaluate(
        "[...document.querySelectorAll('script[src], link[href]')].map(e => e.src || e.href)"
    )
    assert sources and all(s.startswith(live_server.url) for s in sources), sources
    page.wait_for_function("document.querySelectorAll('.opblock').length > 5")
    pay = page.locator("#operations-orders-orders_pay_create")
    pay.locator(".opblock-summary-control").click()
    expect(pay.locator(".parameters")).to_be_attached()
    text = pay.inner_text()
    assert "Idempotency-Key" in text
    assert "Idempotent-Replayed" in text
    for code in ("400", "409", "422"):
        assert code in text
    # a tall page, so the picture holds the header, the replay header and the problems
    page.set_viewport_size({"width": 1280, "height": 2300})
    pay.evaluate("element => element.scrollIntoView()")  # its top at the top
    png = page.screenshot(path=tmp_path / "api-docs.png")
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    assert len(png) > 10_000
    if os.environ.get("IDEMPOTENCY_UPDATE_SCREENSHOTS") == "1":
        SCREENSHOT.write_bytes(png)  # the picture the README shows
