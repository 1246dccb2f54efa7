"""Two django-tenants tenants, each with its own user 1, pay with one key: under the
default scope and under ``tenant_schema_scope``. Prints what each request got, as JSON.

``python -m tests.tenants.run`` with ``TENANTS_DATABASE_URL`` naming a database it may
create and drop (``DJANGO_SETTINGS_MODULE=tests.tenants.settings``).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import django


def _database(create: bool) -> None:
    import psycopg
    from django.conf import settings

    db = settings.DATABASES["default"]
    with psycopg.connect(
        host=db["HOST"], port=db["PORT"], user=db["USER"], dbname="postgres", autocommit=True
    ) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{db["NAME"]}" WITH (FORCE)')
        if create:
            admin.execute(f'CREATE DATABASE "{db["NAME"]}"')


def _tenants() -> None:
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django_tenants.utils import schema_context

    from tests.tenants.customers.models import Customer, Domain

    call_command("migrate_schemas", shared=True, interactive=False, verbosity=0)
    public = Customer.objects.create(schema_name="public")
    Domain.objects.create(domain="public.localhost", tenant=public, is_primary=True)
    for name in ("acme", "globex"):
        tenant = Customer.objects.create(schema_name=name)  # its schema, migrated
        Domain.objects.create(domain=f"{name}.localhost", tenant=tenant, is_primary=True)
        with schema_context(name):
            get_user_model().objects.create(pk=1, username=f"owner-of-{name}", password="!")


def _pay(tenant: str, key: str, iban: str) -> dict[str, Any]:
    from django.test import Client

    answer = Client(HTTP_HOST=f"{tenant}.localhost").post(
        "/pay/", data={"iban": iban}, content_type="application/json",
        HTTP_X_USER="1", HTTP_IDEMPOTENCY_KEY=key,
    )  # fmt: skip
    return {
        "status": answer.status_code,
        "replayed": answer.get("Idempotent-Replayed") == "true",
        "body": answer.content.decode(),
    }


def _scenario(scope: str | None) -> dict[str, Any]:
    from django.test import override_settings

    from idempotency.models import IdempotencyRecord
    from tests.tenants.views import RUNS

    settings = {"PURGE_EVERY": None, **({"SCOPE": scope} if scope else {})}
    replayed, probed = str(uuid.uuid4()), str(uuid.uuid4())
    RUNS.clear()
    with override_settings(IDEMPOTENCY=settings):
        acme = _pay("acme", replayed, "DE-ACME")
        _pay("acme", probed, "DE-ACME")
        same = _pay("globex", replayed, "DE-ACME")  # acme's key and body
        other = _pay("globex", probed, "DE-GLOBEX")  # acme's key, another body
        again = _pay("acme", replayed, "DE-ACME")
    scopes = sorted(
        IdempotencyRecord.objects.filter(key__in=[replayed, probed]).values_list("scope", flat=True)
    )
    return {
        "acme": acme, "same": same, "other": other, "again": again,
        "runs": list(RUNS), "scopes": scopes,
    }  # fmt: skip


def main() -> None:
    django.setup()
    _database(create=True)
    try:
        _tenants()
        found = {
            "default": _scenario(None),
            "tenant": _scenario("idempotency.scopes.tenant_schema_scope"),
        }
    finally:
        from django.db import connections

        connections.close_all()
        _database(create=False)
    print(json.dumps(found))


if __name__ == "__main__":
    main()
