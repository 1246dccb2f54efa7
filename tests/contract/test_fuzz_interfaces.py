"""Property test over the whole interface matrix: every unsafe method, JSON, form, multipart
and raw bodies (well-formed or not, nested arbitrarily deep), any key, every interface and
view kind, through Django's WSGI-style and ASGI handlers: never a 5xx."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.conf import settings
from django.test import AsyncClient, Client, override_settings
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from tests.support.http import multipart
from tests.support.strategies import json_values
from tests.support.users import make_user
from tests.testapp.matrix_bodies import COUNTER_ENV
from tests.testapp.matrix_views import CELLS

pytestmark = pytest.mark.django_db

MIDDLEWARE = [*settings.MIDDLEWARE, "idempotency.IdempotencyMiddleware"]

names = st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), max_size=12)
field_values = st.one_of(st.text(max_size=30), st.integers().map(str), st.just("1"))
fields = st.lists(st.tuples(st.sampled_from(["amount", "label"]) | names, field_values), max_size=5)


def _deep(depth: int) -> bytes:
    return b'{"amount": ' + b"[" * depth + b"]" * depth + b"}"


boundaries = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=30)

bodies = st.one_of(
    # JSON: shaped, any value, deep, malformed
    st.builds(lambda a: (json.dumps({"amount": a}).encode(), "application/json"), json_values),
    st.builds(lambda v: (json.dumps(v).encode(), "application/json"), json_values),
    st.builds(lambda d: (_deep(d), "application/json"), st.sampled_from([5, 199, 201, 5000])),
    st.builds(lambda b: (b, "application/merge-patch+json"), st.binary(max_size=200)),
    # forms, encoded or not
    st.builds(
        lambda f: (
            "&".join(f"{k}={v}" for k, v in f).encode(),
            "application/x-www-form-urlencoded",
        ),
        fields,
    ),
    st.builds(lambda b: (b, "application/x-www-form-urlencoded"), st.binary(max_size=200)),
    # multipart, well-formed or not
    st.builds(
        lambda b, f: (multipart(b, f), f"multipart/form-data; boundary={b}"), boundaries, fields
    ),
    st.builds(
        lambda b, raw: (raw, f"multipart/form-data; boundary={b}"),
        boundaries,
        st.binary(max_size=200),
    ),
    st.builds(lambda raw: (raw, "multipart/form-data"), st.binary(max_size=100)),
    # raw bytes under any other type
    st.builds(
        lambda raw, ctype: (raw, ctype),
        st.binary(max_size=200),
        st.sampled_from(["application/octet-stream", "text/plain", "", "x/y; a=b"]),
    ),
)
keys = st.one_of(
    st.none(),
    st.uuids().map(str),
    st.sampled_from(["fixed-key", '"quoted-key"', "", "a,b", " ", "k" * 256]),
)


@pytest.fixture(autouse=True)
def counter_file(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv(COUNTER_ENV, str(tmp_path / "executions"))


@pytest.fixture
def fuzz_user(db: Any) -> Any:
    return make_user("fuzzer")


@hypothesis_settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    cell=st.sampled_from(sorted(CELLS)),
    method=st.sampled_from(["POST", "PUT", "PATCH", "DELETE"]),
    body=bodies,
    key=keys,
    mode=st.sampled_from(["atomic", "lease"]),
    handler=st.sampled_from(["wsgi", "asgi"]),
)
def test_never_a_server_error(
    fuzz_user: Any,
    cell: str,
    method: str,
    body: tuple[bytes, str],
    key: str | None,
    mode: str,
    handler: str,
) -> None:
    from rest_framework.authtoken.models import Token

    data, content_type = body
    headers = {"X-Probe": str(uuid.uuid4())}
    if key is not None:
        headers["Idempotency-Key"] = key
    middleware = MIDDLEWARE if cell.startswith("middleware/") else settings.MIDDLEWARE
    auth = {"Authorization": f"Token {Token.objects.get(user=fuzz_user).key}"}
    with override_settings(MIDDLEWARE=middleware, IDEMPOTENCY={"MODE": mode}):
        if handler == "wsgi":
            client: Any = Client(raise_request_exception=False, headers=auth)
            client.force_login(fuzz_user)
            response = client.generic(
                method, f"/m/{cell}/", data, content_type=content_type, headers=headers
            )
        else:
            aclient = AsyncClient(raise_request_exception=False, headers=auth)
            aclient.force_login(fuzz_user)
            send = getattr(aclient, method.lower())
            response = async_to_sync(send)(
                f"/m/{cell}/", data, content_type=content_type, headers=headers
            )
    assert response.status_code < 500, (response.status_code, response.content[:500])
