"""Django Ninja's generated OpenAPI documents the contract on protected operations, as
the DRF schema does (tests/contrib/openapi/test_spectacular.py): the key header, the replay
header and the problem answers; valid OpenAPI 3.1 (drf-spectacular's validator)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from drf_spectacular.validation import validate_schema

from idempotency.contrib.openapi import EXPIRY_EXTENSION, KEY_PATTERNS, PROBLEM_SCHEMA
from idempotency.exceptions import PROBLEM_CONTENT_TYPE

PROBLEMS = {400, 403, 409, 410, 413, 422, 503}


@pytest.fixture
def schemas() -> dict[str, Any]:
    return {
        "api": json.loads(Client().get("/n/openapi.json").content),
        "whole": json.loads(Client().get("/nw/openapi.json").content),
    }


def key_header(operation: dict[str, Any]) -> dict[str, Any] | None:
    found = [p for p in operation.get("parameters", []) if p["name"] == "Idempotency-Key"]
    assert len(found) <= 1
    return found[0] if found else None


def test_both_schemas_are_valid_openapi(schemas: dict[str, Any]) -> None:
    for document in schemas.values():
        validate_schema(document)


@pytest.mark.parametrize(
    ("path", "method", "success"),
    [
        ("/n/status/", "post", ["201"]),  # @idempotent
        ("/n/dict/", "post", ["200"]),
        ("/n/async/", "post", ["201"]),  # async
        ("/n/p/orders/", "post", ["201"]),  # protect(router)
        ("/n/p/orders/{order_id}/", "put", ["200"]),
    ],
)
def test_a_protected_operation_documents_the_contract(
    schemas: dict[str, Any], path: str, method: str, success: list[str]
) -> None:
    operation = schemas["api"]["paths"][path][method]
    header = key_header(operation)
    assert header is not None and header["in"] == "header"
    assert header["required"] is False
    assert header["schema"]["pattern"] == KEY_PATTERNS["lenient"]
    responses = operation["responses"]
    for status in success:
        assert "Idempotent-Replayed" in responses[status]["headers"]
    for status in PROBLEMS:
        answer = responses[str(status)]
        assert answer["description"]
        assert answer["content"][PROBLEM_CONTENT_TYPE]["schema"] == PROBLEM_SCHEMA
    assert "Retry-After" in responses["409"]["headers"]
    assert "Retry-After" in responses["503"]["headers"]
    assert "idempotency-key-mismatch" in responses["422"]["description"]


def test_a_status_the_operation_declares_keeps_its_own_answer(schemas: dict[str, Any]) -> None:
    """``/n/status/`` declares 201 and 404: ours are added beside them, theirs untouched."""
    responses = schemas["api"]["paths"]["/n/status/"]["post"]["responses"]
    assert PROBLEM_CONTENT_TYPE not in responses["404"]["content"]
    assert list(responses["201"]["content"]) == ["application/json"]


@pytest.mark.parametrize(
    ("path", "method"),
    [
        ("/n/dict/", "get"),  # safe
        ("/n/plain/", "post"),  # not protected
        ("/n/p/exempt/", "post"),  # exempt under a protected router
        ("/n/p/orders/", "get"),
    ],
)
def test_an_operation_that_takes_no_part_documents_nothing(
    schemas: dict[str, Any], path: str, method: str
) -> None:
    operation = schemas["api"]["paths"][path][method]
    assert key_header(operation) is None
    assert not set(operation["responses"]) & {"409", "422", "503"}


def test_a_required_key_is_documented_as_required(schemas: dict[str, Any]) -> None:
    """``protect(whole, required=True)``: before its routes existed."""
    for path, method in (("/nw/pay/", "post"), ("/nw/later/orders/{order_id}/", "delete")):
        operation = schemas["whole"]["paths"][path][method]
        header = key_header(operation)
        assert header is not None and header["required"] is True
        assert "idempotency-key-required" in operation["responses"]["400"]["description"]


@pytest.mark.parametrize(
    ("path", "seconds", "words"),
    [
        ("/n/status/", 86400, "24 hours (86400 s)"),  # the TTL setting's default
        ("/n/p/orders/", 86400, "24 hours (86400 s)"),  # protect(router)
        ("/n/p/own/", 30, "30 seconds (30 s)"),  # @idempotent(ttl=30)
    ],
)
def test_the_key_publishes_its_expiry(
    schemas: dict[str, Any], path: str, seconds: int, words: str
) -> None:
    """The IETF draft asks a resource to publish its expiry policy: in words, and in
    seconds as an extension a client can read."""
    header = key_header(schemas["api"]["paths"][path]["post"])
    assert header is not None
    assert header[EXPIRY_EXTENSION] == seconds
    assert f"kept for {words} after the first request completes" in header["description"]
