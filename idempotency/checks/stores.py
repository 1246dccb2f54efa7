"""The stores in use (each alias of ``STORES``, and each store a view names for itself)
and whether each fits its mode and cache (E006, E012, E013, E020, E050, W001, W004), and
whether something deletes the expired records of a database store (W040)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks
from django.utils.module_loading import import_string

from idempotency.checks.caches import DUMMY, LOCMEM, backend_is, cache_backend, no_cache, unreadable
from idempotency.checks.messages import cap, message
from idempotency.conf import SETTINGS
from idempotency.stores.base import AtomicStore

#: A store in use: ``(what, class, instance or None, mode)``, ``what`` naming it in messages.
Use = tuple[str, type, Any, Any]

DATABASE_STORE = "idempotency.stores.database.DatabaseStore"


def is_store(store: type, path: str) -> bool:
    """Whether ``store`` is (a subclass of) the store class at ``path``."""
    return issubclass(store, import_string(path))


def _view_policies() -> list[tuple[str, Any]]:
    """``(view name, policy)`` of every protected view; none when the URLconf cannot be
    loaded (Django's own URL checks report that)."""
    from idempotency.http.discovery import protected_views

    try:
        return list(protected_views())
    except Exception:  # noqa: BLE001 - a broken URLconf is reported by Django
        return []


def configured(handler: Any, values: dict[str, Any]) -> dict[str, tuple[type, Any]]:
    """``alias: (class, instance)`` of each usable alias of ``handler``'s setting (the
    others are :func:`~idempotency.checks.backends.check_backends`' to report). Making one
    connects nowhere: every backend connects on first use."""
    entries = values[handler.setting]
    if not SETTINGS[handler.setting].accepts(entries):
        return {}  # E004
    found = {}
    for alias, entry in entries.items():
        if handler.problems(alias, entry):
            continue
        try:
            instance = handler.create(alias)
        except Exception:  # noqa: BLE001 - a constructor's own failure shows at first use
            continue
        found[alias] = (type(instance), instance)
    return found


def stores_in_use(values: dict[str, Any], errors: list[checks.CheckMessage]) -> list[Use]:
    """Every store in use: each alias of ``STORES``, and each store a view names itself
    (``store=``, ``idempotency_store``). An alias no entry configures is appended to
    ``errors`` (E013)."""
    from idempotency.stores import stores

    usable = configured(stores, values)
    uses: list[Use] = [
        (f"the store {alias!r}", cls, instance, values["MODE"])
        for alias, (cls, instance) in usable.items()
    ]
    entries = values["STORES"] if isinstance(values["STORES"], dict) else {}
    for view, policy in _view_policies():
        what = f"the store of the view {view!r}"
        option = policy.store
        if option is None:
            if policy.mode == "atomic" and "default" in usable:
                uses.append((f"the view {view!r}", *usable["default"], "atomic"))
            continue
        if isinstance(option, str):
            if option not in entries:
                aliases = ", ".join(repr(a) for a in entries) or "none"
                errors.append(message("E013", what=cap(what), value=option, aliases=aliases))
            elif option in usable:
                uses.append((what, *usable[option], policy.mode))
            continue
        uses.append((what, type(option), option, policy.mode))
    return uses


def check_stores(values: dict[str, Any], uses: list[Use]) -> list[checks.CheckMessage]:
    """E006, E008, E012, E020, E050 and W001 for each store in use; W004 for each database
    store in lease mode."""
    errors: list[checks.CheckMessage] = []
    databases: dict[str, Any] = getattr(settings, "DATABASES", {}) or {}
    for what, store, instance, mode in uses:
        if mode == "atomic" and not issubclass(store, AtomicStore):  # as the engine chooses
            errors.append(message("E006", what=cap(what), store=store.__qualname__))
        if is_store(store, DATABASE_STORE):
            database = databases.get(instance.using) or {}
            if mode == "lease" and database.get("ATOMIC_REQUESTS"):
                errors.append(message("W004", what=cap(what), alias=instance.using))
        if not is_store(store, "idempotency.stores.cache.CacheStore"):
            continue
        alias = instance.alias
        backend = cache_backend(alias)
        if backend is None:
            errors.append(no_cache(cap(what), alias))
        elif backend_is(backend, DUMMY):
            errors.append(message("E012", what=cap(what), alias=alias))
        elif refused := unreadable(cap(what), alias, backend):
            errors.append(refused)
        elif backend_is(backend, LOCMEM):
            errors.append(message("W001", what=cap(what), alias=alias))
    return errors


#: The Celery beat task that purges expired records (idempotency.contrib.celery.periodic).
PURGE_TASK = "idempotency.purge_expired_records"


def _beat_purges() -> bool:
    """Whether ``CELERY_BEAT_SCHEDULE`` schedules :data:`PURGE_TASK`."""
    schedule = getattr(settings, "CELERY_BEAT_SCHEDULE", None)
    if not isinstance(schedule, dict):
        return False
    return any(isinstance(e, dict) and e.get("task") == PURGE_TASK for e in schedule.values())


def check_purge(values: dict[str, Any], uses: list[Use]) -> list[checks.CheckMessage]:
    """W040: a DatabaseStore in use, and nothing deletes its expired rows: PURGE_EVERY is
    None and no beat schedule names the purge task."""
    if values["PURGE_EVERY"] is not None or _beat_purges():
        return []
    database = [w for w, s, _i, _m in uses if is_store(s, DATABASE_STORE)]
    if not database:
        return []
    return [message("W040", what=cap(database[0]), task=PURGE_TASK)]
