"""The interface matrix: every view kind under every interface, sync and async, WSGI and ASGI.

Cells (``tests/testapp/matrix_views.py``): ``<interface>/<kind>`` for the
interfaces ``decorator``, ``mixin`` (DRF views), ``protect`` (Django Ninja's
``idempotency.contrib.ninja.protect``) and ``middleware``, and the kinds function view, Django
CBV method, ``FormView``, ``CreateView``, DRF ``APIView``, ``@api_view``, viewset action,
async function view, async CBV, and a Django Ninja operation, sync and async.

Each cell is checked in atomic and lease mode for: the first request, its
byte-identical replay, a mismatch (422), unkeyed requests (unaffected), and
concurrent duplicates (the body runs once; counted in an O_APPEND file that
no rollback can undo). Transports: Django's test client (the WSGI-style
handler), ``AsyncClient`` (Django's ASGI handler, in-process) and a real
uvicorn server on a free port (PostgreSQL).
"""

from __future__ import annotations

import http.client
import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from asgiref.sync import async_to_sync
from django.conf import settings
from django.db import connection
from django.test import AsyncClient, Client, override_settings

from tests.support import services
from tests.support.servers import uvicorn_server
from tests.support.storms import run_threads, succeeded
from tests.support.users import make_user
from tests.testapp.matrix_bodies import COUNTER_ENV, executions
from tests.testapp.matrix_views import CELLS

pytestmark = pytest.mark.django_db(transaction=True)

MODES = ("atomic", "lease")
MIDDLEWARE = [
    *settings.MIDDLEWARE,
    "idempotency.IdempotencyMiddleware",
]


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    content: bytes

    def json(self) -> Any:
        return json.loads(self.content)


Call = Callable[..., Answer]


def body_of(cell: str, amount: int) -> tuple[bytes, str]:
    if CELLS[cell][1] == "form":
        return f"amount={amount}".encode(), "application/x-www-form-urlencoded"
    return json.dumps({"amount": amount}).encode(), "application/json"


def request_headers(key: str | None, probe: str) -> dict[str, str]:
    headers = {"X-Probe": probe}
    if key is not None:
        headers["Idempotency-Key"] = key
    return headers


@pytest.fixture(autouse=True)
def counter_file(tmp_path_factory: pytest.TempPathFactory, monkeypatch: Any) -> Path:
    path = tmp_path_factory.getbasetemp() / "matrix-executions"
    monkeypatch.setenv(COUNTER_ENV, str(path))
    return path


@pytest.fixture
def user(db: Any) -> Any:
    return make_user("matrix")


def _settings(cell: str, mode: str) -> Any:
    interface = cell.split("/", 1)[0]
    # the decorator and mixin cells run without the middleware: each interface on its own
    middleware = MIDDLEWARE if interface == "middleware" else settings.MIDDLEWARE
    return override_settings(MIDDLEWARE=middleware, IDEMPOTENCY={"MODE": mode})


def _answer(response: Any) -> Answer:
    return Answer(
        response.status_code, {k.lower(): v for k, v in response.items()}, response.content
    )


def wsgi_caller(user: Any) -> Call:
    from rest_framework.authtoken.models import Token

    token = Token.objects.get(user=user).key

    def call(cell: str, *, key: str | None, probe: str, amount: int, sleep: float = 0) -> Answer:
        client = Client(HTTP_AUTHORIZATION=f"Token {token}")
        client.force_login(user)
        body, content_type = body_of(cell, amount)
        response = client.generic(
            "POST",
            f"/m/{cell}/?sleep={sleep}",
            body,
            content_type=content_type,
            headers=request_headers(key, probe),
        )
        return _answer(response)

    return call


def asgi_caller(user: Any) -> Call:
    from rest_framework.authtoken.models import Token

    token = Token.objects.get(user=user).key
    client = AsyncClient(headers={"Authorization": f"Token {token}"})
    client.force_login(user)

    def call(cell: str, *, key: str | None, probe: str, amount: int, sleep: float = 0) -> Answer:
        body, content_type = body_of(cell, amount)
        response = async_to_sync(client.post)(
            f"/m/{cell}/?sleep={sleep}",
            body,
            content_type=content_type,
            headers=request_headers(key, probe),
        )
        return _answer(response)

    return call


def server_caller(base_url: str, user: Any) -> Call:
    from rest_framework.authtoken.models import Token

    token = Token.objects.get(user=user).key
    browser = Client()
    browser.force_login(user)
    session = browser.cookies[settings.SESSION_COOKIE_NAME].value
    netloc = urlsplit(base_url).netloc

    def call(cell: str, *, key: str | None, probe: str, amount: int, sleep: float = 0) -> Answer:
        body, content_type = body_of(cell, amount)
        headers = {
            **request_headers(key, probe),
            "Content-Type": content_type,
            "Authorization": f"Token {token}",
            "Cookie": f"{settings.SESSION_COOKIE_NAME}={session}",
        }
        conn = http.client.HTTPConnection(netloc, timeout=60)
        try:
            conn.request("POST", f"/m/{cell}/?sleep={sleep}", body=body, headers=headers)
            response = conn.getresponse()
            return Answer(
                response.status,
                {k.lower(): v for k, v in response.getheaders()},
                response.read(),
            )
        finally:
            conn.close()

    return call


@pytest.fixture(scope="session")
def asgi_servers(django_db_setup: Any, django_db_blocker: Any) -> Iterator[Callable[[str], str]]:
    """uvicorn servers of the matrix (one per mode, started on first use)."""
    from contextlib import ExitStack

    running: dict[str, str] = {}
    with ExitStack() as stack:

        def server(mode: str) -> str:
            if mode not in running:
                env = {
                    "DATABASE_URL": services.tests_database_url(),
                    "MATRIX_MODE": mode,
                    "DJANGO_SETTINGS_MODULE": "tests.asgi_settings",
                }
                running[mode] = stack.enter_context(uvicorn_server(env))
            return running[mode]

        yield server


def _callers(transport: str, user: Any, request: pytest.FixtureRequest, mode: str) -> Call:
    if transport == "wsgi":
        return wsgi_caller(user)
    if transport == "asgi":
        return asgi_caller(user)
    if connection.vendor not in {"postgresql", "mysql"}:
        pytest.fail("the uvicorn transport needs a server database")  # server_db skips first
    servers = request.getfixturevalue("asgi_servers")
    return server_caller(servers(mode), user)


def transports() -> list[Any]:
    return [
        pytest.param("wsgi", id="wsgi"),
        pytest.param("asgi", id="asgi"),
        pytest.param("uvicorn", id="uvicorn", marks=[pytest.mark.server_db, pytest.mark.servers]),
    ]


def assert_problem(answer: Answer, status: int, code: str) -> None:
    assert answer.status == status, answer.content
    assert answer.headers["content-type"] == "application/problem+json"
    assert answer.json()["code"] == code


@pytest.mark.parametrize("transport", transports())
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("cell", list(CELLS))
def test_first_replay_mismatch_and_unkeyed(
    cell: str, mode: str, transport: str, user: Any, request: pytest.FixtureRequest
) -> None:
    with _settings(cell, mode):
        call = _callers(transport, user, request, mode)
        key, probe = str(uuid.uuid4()), str(uuid.uuid4())

        first = call(cell, key=key, probe=probe, amount=2)
        assert first.status == 201, first.content
        assert "idempotent-replayed" not in first.headers
        assert first.json()["amount"] == 2
        assert executions(probe) == 1
        if mode == "atomic" and not CELLS[cell][2]:
            # sync views run inside atomic mode's transaction (async views: lease mode)
            assert first.json()["atomic"] is True

        again = call(cell, key=key, probe=probe, amount=2)
        assert again.status == 201
        assert again.headers.get("idempotent-replayed") == "true"
        assert again.content == first.content
        assert executions(probe) == 1

        other = call(cell, key=key, probe=probe, amount=999)
        assert_problem(other, 422, "idempotency-key-mismatch")
        assert executions(probe) == 1

        plain = str(uuid.uuid4())
        one = call(cell, key=None, probe=plain, amount=3)
        two = call(cell, key=None, probe=plain, amount=3)
        assert (one.status, two.status) == (201, 201)
        assert "idempotent-replayed" not in one.headers
        assert "idempotent-replayed" not in two.headers
        assert one.content != two.content
        assert executions(plain) == 2


def concurrent_params() -> list[Any]:
    return [
        pytest.param(
            cell,
            mode,
            transport,
            id=f"{cell}-{mode}-{transport}",
            marks=[
                pytest.mark.server_db,
                *([pytest.mark.servers] if transport == "uvicorn" else []),
            ],
        )
        for cell in CELLS
        for mode in MODES
        for transport in ("wsgi", "uvicorn")
    ]


@pytest.mark.parametrize(("cell", "mode", "transport"), concurrent_params())
def test_concurrent_duplicates_run_the_body_once(
    cell: str, mode: str, transport: str, user: Any, request: pytest.FixtureRequest
) -> None:
    duplicates = 6
    with _settings(cell, mode):
        call = _callers(transport, user, request, mode)
        key, probe = str(uuid.uuid4()), str(uuid.uuid4())
        answers: list[Answer] = succeeded(
            run_threads(duplicates, lambda _: call(cell, key=key, probe=probe, amount=2, sleep=0.5))
        )

    assert len(answers) == duplicates
    assert executions(probe) == 1, [a.status for a in answers]
    done = [a for a in answers if a.status == 201]
    assert done, [(a.status, a.content) for a in answers]
    assert all(a.content == done[0].content for a in done)
    for answer in answers:
        if answer.status != 201:
            assert_problem(answer, 409, "idempotency-request-in-progress")
