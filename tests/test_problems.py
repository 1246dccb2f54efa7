"""RFC 9457 problem details (``idempotency.problems``): the document's members, its ``type``
under ``PROBLEM_TYPE_BASE``, compact ASCII JSON as DRF renders it, and a response ready to
return with its headers."""

from __future__ import annotations

import json

from django.test import override_settings

from idempotency.problems import (
    PROBLEM_CONTENT_TYPE,
    problem_body,
    problem_response,
    render_problem,
)


def test_a_problem_response_carries_the_document_and_its_headers() -> None:
    response = problem_response(
        409,
        "idempotency-request-in-progress",
        "Request in progress",
        "A request with this key is still running.",
        headers={"Retry-After": "2"},
        wait=2,
    )
    assert response.status_code == 409
    assert response["Content-Type"] == PROBLEM_CONTENT_TYPE == "application/problem+json"
    assert response["Retry-After"] == "2"
    document = json.loads(response.content)
    assert document == {
        "type": document["type"],
        "title": "Request in progress",
        "status": 409,
        "detail": "A request with this key is still running.",
        "code": "idempotency-request-in-progress",
        "wait": 2,
    }
    assert document["type"].endswith("idempotency-request-in-progress")


def test_the_type_is_the_configured_base_and_the_code() -> None:
    with override_settings(IDEMPOTENCY={"PROBLEM_TYPE_BASE": "https://errors.example.com/"}):
        body = problem_body(422, "idempotency-key-mismatch", "Key mismatch", "Another body.")
    assert body["type"] == "https://errors.example.com/idempotency-key-mismatch"


def test_the_json_is_compact_and_ascii_as_drf_renders_it() -> None:
    rendered = render_problem({"detail": "clé déjà utilisée", "status": 422})
    assert rendered == b'{"detail":"cl\\u00e9 d\\u00e9j\\u00e0 utilis\\u00e9e","status":422}'
    assert json.loads(rendered)["detail"] == "clé déjà utilisée"
