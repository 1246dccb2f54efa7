"""Tenants in PostgreSQL schemas (django-tenants), issue 43, finding 4: each tenant has
its own user 1. Under the default scope tenant B's user replayed tenant A's stored
payment (same key and body) and got a 422 for another body, an oracle on A's live keys;
under ``tenant_schema_scope`` each tenant's records are its own.

The project (``tests/tenants``) runs in a process of its own: django-tenants takes over
the database backend, the routers and the middleware, which the test settings cannot
share. It creates and drops the database ``<DATABASE_URL's name>_tenants``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

pytestmark = pytest.mark.postgres

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def found() -> dict[str, Any]:
    pytest.importorskip("django_tenants")
    db = settings.DATABASES["default"]
    url = f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}_tenants"
    env = {
        **os.environ,
        "TENANTS_DATABASE_URL": url,
        "DJANGO_SETTINGS_MODULE": "tests.tenants.settings",
    }
    run = subprocess.run(
        [sys.executable, "-m", "tests.tenants.run"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    return dict(json.loads(run.stdout.strip().splitlines()[-1]))


def test_under_the_default_scope_tenants_share_records(found: dict[str, Any]) -> None:
    """The finding, reproduced (the reason for check W050)."""
    default = found["default"]
    assert default["acme"]["status"] == 201
    assert default["same"]["replayed"] and '"tenant": "acme"' in default["same"]["body"]
    assert default["other"]["status"] == 422  # the oracle on acme's key
    assert default["runs"] == ["acme", "acme"]


def test_tenant_schema_scope_keeps_each_tenants_records_its_own(found: dict[str, Any]) -> None:
    tenant = found["tenant"]
    assert tenant["acme"]["status"] == tenant["same"]["status"] == 201
    assert not tenant["same"]["replayed"] and '"tenant": "globex"' in tenant["same"]["body"]
    assert tenant["other"]["status"] == 201 and not tenant["other"]["replayed"]
    assert tenant["again"]["replayed"] and tenant["again"]["body"] == tenant["acme"]["body"]
    assert tenant["runs"] == ["acme", "acme", "globex", "globex"]
    assert set(tenant["scopes"]) == {"schema:acme/auth.user:1", "schema:globex/auth.user:1"}
