"""Scopes: whose keys are these? A key is only ever looked up inside its scope.

The default scope names the principal's kind and its primary key: ``auth.user:1``
(the model's ``app_label.model_name``, lower-cased), so principals of two kinds with one
primary key (a user and an API client of a custom DRF authentication) never share
records. A principal loaded from another database than ``default`` (a database per
tenant, chosen by ``DATABASE_ROUTERS``) is named with its database too:
``auth.user@tenant_b:1``, so two tenants' users with one primary key never share records
either. Tenants that share one database in schemas (django-tenants) need
:func:`tenant_schema_scope` as ``SCOPE`` (check ``idempotency.W050`` says so). An
anonymous caller has no scope: the ``ANONYMOUS`` setting decides (403, or no
idempotency).

A plain string given as a view's scope (``@idempotent(scope="shop")``) names a part of
each caller's records, never records shared by every caller: it is combined with the
caller's own scope, and an anonymous caller falls under ``ANONYMOUS``. A scope function
that returns ``""`` means anonymous too. Records shared by every caller of a view are
only ever explicit: ``scope=shared("shop")``.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS, connection
from django.http import HttpRequest
from django.utils.crypto import salted_hmac
from django.utils.functional import empty as _empty


class SharedScope(str):
    """A scope every caller of a view shares, anonymous callers included (:func:`shared`)."""

    __slots__ = ()


def shared(name: str) -> SharedScope:
    """Mark ``name`` as a scope shared by every caller: ``@idempotent(scope=shared("shop"))``.

    Any caller's key then replays any other caller's stored response under that key,
    anonymous callers included. Use it only where the response holds nothing of the
    caller's own (a public catalogue import), never for payments or personal data.
    """
    if not isinstance(name, str) or not name:
        raise ValueError("shared() takes a non-empty scope name")
    return SharedScope(name)


async def aload_user(request: HttpRequest) -> None:
    """Under ASGI, load the caller's user on the event loop (``request.auser()``, from
    Django's authentication middleware) and put it in ``request.user``, so a scope that
    reads ``request.user`` makes no database query in sync code. Nothing where the user
    is loaded already, or no authentication middleware ran."""
    own = request.__dict__
    lazy, auser = own.get("user"), getattr(request, "auser", None)
    if auser is None or lazy is None or getattr(lazy, "_wrapped", None) is not _empty:
        return
    if own.get("auth") not in (None, False):  # Django Ninja authenticated a principal
        return
    request.user = await auser()


def principal_label(principal: Any) -> str:
    """The kind of an authenticated principal: its model's ``app_label.model_name``
    (``auth.user``), or the lower-cased dotted path of its class where it is no model."""
    # through the instance, not type(): request.user is a SimpleLazyObject under
    # Django's authentication middleware, which passes both through to the user
    meta = getattr(principal, "_meta", None)
    label = getattr(meta, "label_lower", None)
    if isinstance(label, str) and label:
        return label
    cls = principal.__class__
    return f"{cls.__module__}.{cls.__qualname__}".lower()


def principal_of(request: Any) -> Any:
    """The authenticated caller of ``request``, or None for an anonymous one.

    Django Ninja's ``request.auth`` (what the operation's ``auth=`` returned: a user, a
    token string, an API-key object) when Ninja authenticated the request; otherwise
    the authenticated ``request.user`` (Django's middleware, or DRF's authentication: on
    a DRF ``Request`` the principal is always its user, never its ``auth`` token).
    """
    plain = vars(request).get("_request") if hasattr(request, "__dict__") else None
    if plain is None:  # not DRF: Ninja leaves its principal on the HttpRequest itself
        auth = vars(request).get("auth") if hasattr(request, "__dict__") else None
        if auth is not None and auth is not False:
            return auth
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return None
    return user


def principal_scope(principal: Any) -> str | None:
    """The scope of one principal, never shared between principals of different kinds.

    A user or another model instance (an API key, a client application):
    ``<app_label>.<model_name>:<pk>`` (``auth.user:1``, see ``principal_label``), and
    ``<app_label>.<model_name>@<database>:<pk>`` for one loaded from another database
    than ``default`` (``auth.user@tenant_b:1``: the primary keys of two databases are
    two principals). A token string (or bytes), such as Django Ninja's ``HttpBearer``
    returns: ``token:`` and an HMAC of it keyed with ``SECRET_KEY``, so the store never
    holds the token itself (a new ``SECRET_KEY`` starts new scopes). Anything else has
    no stable identity we can name: None, treated as anonymous (give the view a
    ``scope=`` for it).
    """
    pk = getattr(principal, "pk", None)
    named = getattr(principal, "is_authenticated", False) is True or hasattr(principal, "_meta")
    if named and pk is not None:
        state = getattr(principal, "_state", None)  # a model instance: where it was loaded
        database = getattr(state, "db", None)
        if isinstance(database, str) and database != DEFAULT_DB_ALIAS:
            return f"{principal_label(principal)}@{database}:{pk}"
        return f"{principal_label(principal)}:{pk}"
    if isinstance(principal, str | bytes) and principal:
        digest = salted_hmac("idempotency.scopes.token", principal, algorithm="sha256")
        return f"token:{digest.hexdigest()}"
    return None


def user_scope(request: HttpRequest) -> str | None:
    """The caller's scope (the default): ``<app_label>.<model_name>:<pk>``
    (``auth.user:1``) for an authenticated user or another model principal, the
    :func:`principal_scope` of a Django Ninja principal, None for an anonymous caller."""
    principal = principal_of(request)
    if principal is None:
        return None
    return principal_scope(principal)


def tenant_schema_scope(request: HttpRequest) -> str | None:
    """The default scope within the request's tenant, for django-tenants (a schema per
    tenant in one database): ``schema:<schema_name>/`` and the :func:`user_scope`
    (``schema:acme/auth.user:1``). Set ``IDEMPOTENCY = {"SCOPE":
    "idempotency.scopes.tenant_schema_scope"}``.

    The schema is the one the request's queries run in (``connection.schema_name``,
    which django-tenants' middleware sets from the request's tenant), so two tenants'
    users with one primary key never share records, and a 422 never tells one tenant of
    another's keys. None for an anonymous caller, as :func:`user_scope`. Where the
    connection names no schema (django-tenants' backend is not in use), Django's
    ``ImproperlyConfigured`` is raised.
    """
    caller = user_scope(request)
    if caller is None:
        return None
    schema = getattr(connection, "schema_name", None)
    if not isinstance(schema, str) or not schema:
        raise ImproperlyConfigured(
            "tenant_schema_scope needs django-tenants: the default database connection has "
            "no schema_name (its ENGINE is 'django_tenants.postgresql_backend')."
        )
    return f"schema:{schema}/{caller}"
