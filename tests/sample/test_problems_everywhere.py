"""Every error the sample answers is problem+json: one rendering, stable codes, no HTML.

The walk below requests every URL pattern of the API with ids that name nothing,
ids that are not ids, every method and broken bodies, as an anonymous caller and
as a customer, under ``DEBUG=0`` and ``DEBUG=1`` (the README's run command), and
checks each error answer's shape.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.test import APIClient

from config.middleware import PROBLEMS, problem_for_status
from tests.support.api_clients import KeyedAPIClient

pytestmark = pytest.mark.django_db

CODE = re.compile(r"\A[a-z0-9]+(?:-[a-z0-9]+)*\Z")
CONVERTER = re.compile(r"<(?:(?P<converter>[^>:]+):)?(?P<name>[^>]+)>")
BAD_VALUES = {
    "order_id": ["987654", "abc", "99999999999999999999999", "0", "-1"],
    "str": ["PAY-none", "\u00fcn\u00ef", "x" * 300, "%00"],
}
BODIES: list[tuple[str, bytes]] = [
    ("none", b""),
    ("truncated", b'{"amount": '),
    ("not an object", b'"10.00"'),
    ("list", b"[1, 2]"),
    ("null", b"null"),
    ("huge number", b'{"amount": 1e999, "request_id": "r", "pay_no": "p"}'),
    ("nested", b"[" * 64 + b"]" * 64),
    ("not utf-8", b'{"amount": "\xff"}'),
]
METHODS = ["get", "post", "put", "patch", "delete"]
EXTRA_PATHS = ["/api/nope/", "/api/orders/abc/pay/", "/api/orders/1/nope/", "/nope", "/api"]


def api_routes(
    patterns: list[URLPattern | URLResolver] | None = None, prefix: str = ""
) -> Iterator[str]:
    """Every route of the project's URLconf below ``api/``, as ``/api/...`` strings."""
    for pattern in get_resolver().url_patterns if patterns is None else patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            yield from api_routes(pattern.url_patterns, route)
        elif route.startswith("api/"):
            yield "/" + route


def concrete_paths(route: str) -> list[str]:
    converters = CONVERTER.findall(route)
    if not converters:
        return [route]
    values = BAD_VALUES[converters[0][0] or "str"]
    return [CONVERTER.sub(value, route, count=1) for value in values]


def assert_problem_shape(response: Any, where: str) -> dict[str, Any]:
    assert response["Content-Type"] == "application/problem+json", (where, response.content[:200])
    body: dict[str, Any] = json.loads(response.content)
    assert body["status"] == response.status_code, where
    assert CODE.fullmatch(body["code"]), (where, body)
    assert body["type"].endswith("/" + body["code"]) or body["type"].endswith(body["code"])
    assert body["title"] and isinstance(body["detail"], str), (where, body)
    assert "Traceback" not in response.content.decode(), where
    # one rendering: compact JSON, non-ASCII escaped (DRF's and the library's alike)
    assert response.content == json.dumps(body, separators=(",", ":")).encode(), where
    return body


def customer(user: Any) -> APIClient:
    client = KeyedAPIClient(raise_request_exception=False)
    client.force_authenticate(user=user)
    return client


def walk(client: APIClient) -> tuple[int, list[str]]:
    """Request everything; the number of error answers, and every 5xx seen."""
    errors = 0
    server_errors: list[str] = []
    paths = [p for route in sorted(set(api_routes())) for p in concrete_paths(route)]
    for path in [*paths, *EXTRA_PATHS]:
        for method in METHODS:
            bodies = BODIES if method in {"post", "put", "patch"} else BODIES[:1]
            for label, body in bodies:
                response = getattr(client, method)(path, data=body, content_type="application/json")
                where = f"{method.upper()} {path} ({label})"
                if response.status_code >= 400:
                    errors += 1
                    assert_problem_shape(response, where)
                if response.status_code >= 500:
                    server_errors.append(f"{where}: {response.content[:120]!r}")
    return errors, server_errors


def test_the_walk_covers_every_api_route() -> None:
    routes = set(api_routes())
    assert {
        "/api/orders/<order_id:pk>/pay/",
        "/api/orders/<order_id:pk>/cancel/",
        "/api/orders/<order_id:pk>/ship/",
        "/api/accounts/me/ledger/",
        "/api/payments/<str:pay_no>/",
        "/api/payments/callback/",
        "/api/auth/token/",
    } <= routes


@pytest.mark.parametrize("debug", [False, True], ids=["DEBUG=0", "DEBUG=1"])
@pytest.mark.parametrize("who", ["anonymous", "customer"])
def test_every_error_of_every_route_is_a_problem(user: Any, debug: bool, who: str) -> None:
    client = customer(user) if who == "customer" else APIClient(raise_request_exception=False)
    with override_settings(DEBUG=debug):
        errors, server_errors = walk(client)
    assert errors > 500  # the walk met plenty of errors
    assert server_errors == []


@pytest.mark.parametrize("debug", [False, True], ids=["DEBUG=0", "DEBUG=1"])
@pytest.mark.parametrize(
    ("path", "method", "status", "code"),
    [
        ("/api/nope/", "get", 404, "not-found"),
        ("/api/orders/abc/pay/", "post", 404, "not-found"),
        ("/api/orders/99999999999999999999999/", "get", 404, "not-found"),
        ("/api/orders/", "delete", 405, "method-not-allowed"),
        ("/api/orders/1/cancel/", "get", 405, "method-not-allowed"),
    ],
)
def test_url_level_errors(
    api_client: APIClient, debug: bool, path: str, method: str, status: int, code: str
) -> None:
    with override_settings(DEBUG=debug):
        response = getattr(api_client, method)(path)
    body = assert_problem_shape(response, path)
    assert (body["status"], body["code"]) == (status, code)
    if status == 405:
        assert "POST" in response["Allow"] or "GET" in response["Allow"]


@pytest.mark.parametrize("debug", [False, True], ids=["DEBUG=0", "DEBUG=1"])
def test_an_unexpected_exception_is_a_500_problem_without_a_trace(
    api_client: APIClient, debug: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(**kwargs: Any) -> Any:
        raise RuntimeError("secret internals")

    monkeypatch.setattr("orders.apis.order_list", boom)
    with override_settings(DEBUG=debug):
        response = api_client.get("/api/orders/")
    body = assert_problem_shape(response, "GET /api/orders/")
    assert (body["status"], body["code"]) == (500, "server-error")
    assert b"secret internals" not in response.content


@pytest.mark.parametrize("debug", [False, True], ids=["DEBUG=0", "DEBUG=1"])
def test_very_deep_json_is_a_problem(api_client: APIClient, debug: bool) -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    with override_settings(DEBUG=debug):
        response = api_client.post("/api/orders/", data=deep, content_type="application/json")
    assert_problem_shape(response, "deep JSON")


def test_the_library_and_the_apps_render_alike(api_client: APIClient) -> None:
    library = api_client.post(
        "/api/accounts/me/deposit/",
        {"amount": "1.00"},
        format="json",
        HTTP_IDEMPOTENCY_KEY=None,
    )
    app = api_client.post("/api/orders/", {"amount": "1.00"}, format="json")
    assert library.json()["code"] == "idempotency-key-required"
    assert app.json()["code"] == "validation-error"
    for response in (library, app):
        assert_problem_shape(response, response.wsgi_request.path)


def test_not_found_wording_is_one_style(api_client: APIClient, user: Any) -> None:
    details = {
        api_client.get("/api/orders/987654/").json()["detail"],
        api_client.post("/api/orders/987654/cancel/").json()["detail"],
        api_client.post("/api/orders/987654/pay/", {"pay_no": "P"}, format="json").json()["detail"],
    }
    assert details == {"No such order."}
    assert api_client.get("/api/payments/P-none/").json()["detail"] == "No such payment."
    assert api_client.get("/api/nope/").json()["detail"] == "No such resource."


@pytest.mark.parametrize("status", [*PROBLEMS, 418, 429, 502, 599])
def test_every_status_has_a_stable_code(status: int) -> None:
    code, title, detail = problem_for_status(status)
    assert CODE.fullmatch(code) and title and detail


def test_the_admin_keeps_its_html(client: Any) -> None:
    response = client.get("/admin/nope/")
    assert response["Content-Type"].startswith("text/html")


def test_the_readmes_run_command_answers_problems_too(tmp_path: Any) -> None:
    """``manage.py runserver`` (what ``python3 dev.py run`` serves) with ``DEBUG=1``: a URL
    404 and a real 500 (an empty database: no tables) are problem+json, no HTML, no trace."""
    root = Path(__file__).resolve().parents[2]
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {
        **{k: v for k, v in os.environ.items() if k not in {"DJANGO_SETTINGS_MODULE"}},
        "DEBUG": "1",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'empty.sqlite3'}",
    }
    server = subprocess.Popen(
        [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
        cwd=root,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def fetch(path: str, **headers: str) -> tuple[int, str, bytes]:
        request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, response.headers["Content-Type"], response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.headers["Content-Type"], error.read()

    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                status, content_type, body = fetch("/api/nope/")
                break
            except (ConnectionError, urllib.error.URLError):
                assert time.monotonic() < deadline, "runserver did not start"
                time.sleep(0.2)  # real time: waiting for runserver to listen
        assert (status, content_type) == (404, "application/problem+json")
        assert json.loads(body)["code"] == "not-found"
        status, content_type, body = fetch("/api/orders/", Authorization="Token " + "0" * 40)
        assert (status, content_type) == (500, "application/problem+json")
        assert json.loads(body)["code"] == "server-error"
        assert b"Traceback" not in body and b"no such table" not in body
    finally:
        server.terminate()
        server.wait(10)
