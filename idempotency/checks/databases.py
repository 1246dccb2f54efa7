"""The databases behind DatabaseStore and atomic mode: a vendor the store has SQL for
(E030), aliases that exist (E017; a store's own is E015, :mod:`.backends`), writes left
outside atomic mode's transaction (W006), routers that make a store's database a read
replica (W008), and tenants (a schema or a database each) under the default scope (W050,
W051)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks

from idempotency.checks.messages import cap, message
from idempotency.checks.stores import DATABASE_STORE, Use, is_store
from idempotency.conf import SETTINGS

#: The database vendors (``connection.vendor``) DatabaseStore has SQL for.
SUPPORTED_VENDORS = frozenset({"postgresql", "mysql", "sqlite"})


def _vendor(engine: str) -> str | None:
    """The ``vendor`` of a database ENGINE's wrapper (``connection.vendor``, read from the
    class: nothing connects), or None when the backend cannot be loaded (Django reports
    that itself)."""
    from django.db.utils import load_backend

    try:
        vendor = load_backend(engine).DatabaseWrapper.vendor
    except Exception:  # noqa: BLE001 - a backend that does not load is Django's to report
        return None
    return str(vendor)


def check_database_vendors(values: dict[str, Any], uses: list[Use]) -> list[checks.CheckMessage]:
    """E030: a DatabaseStore in use on a database it has no SQL for (Oracle, a third-party
    backend), caught at startup instead of answering 500 to every keyed request."""
    databases: dict[str, Any] = getattr(settings, "DATABASES", {}) or {}
    errors = []
    for what, store, instance, _mode in uses:
        if not is_store(store, DATABASE_STORE):
            continue
        alias = instance.using
        engine = (databases.get(alias) or {}).get("ENGINE") if isinstance(alias, str) else None
        if not isinstance(engine, str):
            continue  # an unknown alias is E015
        vendor = _vendor(engine)
        if vendor is not None and vendor not in SUPPORTED_VENDORS:
            errors.append(
                message("E030", what=cap(what), alias=alias, engine=engine, vendor=vendor)
            )
    return errors


def store_databases(uses: list[Use]) -> list[str]:
    """The databases of the database stores in use, each once, in order."""
    found = [instance.using for _w, store, instance, _m in uses if is_store(store, DATABASE_STORE)]
    return list(dict.fromkeys(found))


def check_database_aliases(values: dict[str, Any], uses: list[Use]) -> list[checks.CheckMessage]:
    """E017 (ATOMIC_DATABASES) and W006 (databases outside atomic mode's transaction)."""
    databases = getattr(settings, "DATABASES", {}) or {}
    known = ", ".join(sorted(databases)) or "(none)"
    stores = [alias for alias in store_databases(uses) if alias in databases]  # else E015
    if not stores:
        return []
    wrapped = values["ATOMIC_DATABASES"]
    if not SETTINGS["ATOMIC_DATABASES"].accepts(wrapped):
        return []  # E004
    unknown = [name for name in wrapped if name not in databases]
    if unknown:
        return [message("E017", unknown=unknown, known=known)]
    if values["MODE"] != "lease":
        outside = sorted(set(databases) - {*stores, *wrapped})
        if outside:
            return [message("W006", aliases=", ".join(outside), alias=", ".join(stores))]
    return []


def check_routers(uses: list[Use]) -> list[checks.CheckMessage]:
    """W008: a database store's database is one the routers only read from (a replica)."""
    databases = getattr(settings, "DATABASES", {}) or {}
    if not getattr(settings, "DATABASE_ROUTERS", None):
        return []
    from django.db import router

    from idempotency.models import IdempotencyRecord, SubmitToken

    warnings = []
    for what, store, instance, _mode in uses:
        alias = instance.using if is_store(store, DATABASE_STORE) else None
        if alias not in databases:
            continue
        for model in (IdempotencyRecord, SubmitToken):
            try:
                read = router.db_for_read(model)
                write = router.db_for_write(model)
            except Exception:  # noqa: BLE001 - a router's own bug is not ours to report
                continue
            if read == alias and write != alias:
                where = f"The database of {what}"
                found = message(
                    "W008", what=where, alias=alias, model=model._meta.label, write=write
                )
                warnings.append(found)
                break
    return warnings


#: django-tenants' database backend: its connection names the request's schema.
TENANTS_ENGINE = "django_tenants.postgresql_backend"


def check_tenant_scope(values: dict[str, Any]) -> list[checks.CheckMessage]:
    """W050: django-tenants under the default scope; W051: DATABASE_ROUTERS under it."""
    from idempotency.scopes import user_scope

    if values["SCOPE"] not in (SETTINGS["SCOPE"].default, user_scope):
        return []
    databases: dict[str, Any] = getattr(settings, "DATABASES", {}) or {}
    # django-tenants runs only on its backend: every project of it names this ENGINE
    tenants = [
        alias
        for alias, db in databases.items()
        if isinstance(db, dict) and db.get("ENGINE") == TENANTS_ENGINE
    ]
    if tenants:
        return [message("W050", alias=tenants[0])]
    if getattr(settings, "DATABASE_ROUTERS", None):
        return [message("W051")]
    return []
