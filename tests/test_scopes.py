"""Scopes that cannot collide or be shared by accident (issue 36, findings 3 and 4).

The views here run the real flow on the database store: a request built by hand, its
``user`` set as authentication middleware or a custom DRF authentication would set it.
"""

from __future__ import annotations

import json
import uuid
from types import SimpleNamespace
from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser
from django.core.management import call_command
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.test import RequestFactory, override_settings
from django.utils.functional import SimpleLazyObject

from idempotency import idempotent
from idempotency.models import IdempotencyRecord
from idempotency.scopes import shared, user_scope
from tests.support.counting import Counter
from tests.support.stores import STORE_VARIANTS, variant_params

pytestmark = pytest.mark.django_db

rf = RequestFactory()
runs = Counter()


class ApiClient:
    """A principal of a custom DRF authentication: no model, its own primary keys."""

    is_authenticated = True

    def __init__(self, pk: int) -> None:
        self.pk = pk


def _card(request: HttpRequest) -> HttpResponse:
    """Stores what the caller sent: their card and e-mail come back in the response."""
    runs()
    return JsonResponse({"caller": json.loads(request.body)}, status=201)


default_view = idempotent(_card)
shop_view = idempotent(scope="shop")(_card)
shared_view = idempotent(scope=shared("shop"))(_card)
empty_view = idempotent(scope=lambda request: "")(_card)


def call(view: Any, principal: Any, key: str, body: dict[str, str]) -> HttpResponse:
    request = rf.post("/pay/", data=body, content_type="application/json")
    request.META["HTTP_IDEMPOTENCY_KEY"] = key
    request.user = principal
    return view(request)  # type: ignore[no-any-return]


def test_the_default_scope_names_the_principals_model(user: Any) -> None:
    request = rf.post("/")
    request.user = user
    assert user_scope(request) == f"auth.user:{user.pk}"
    request.user = ApiClient(user.pk)
    assert user_scope(request) == f"tests.test_scopes.apiclient:{user.pk}"
    request.user = AnonymousUser()
    assert user_scope(request) is None
    # as Django's authentication middleware sets it: a lazy object around the user
    request.user = SimpleLazyObject(lambda: user)
    assert user_scope(request) == f"auth.user:{user.pk}"


def test_a_principal_of_another_kind_with_the_same_pk_never_replays_a_users_record(
    user: Any,
) -> None:
    """Finding 3: an API client with pk=1 replayed the user's 201, IBAN included."""
    key, before = str(uuid.uuid4()), runs.count
    first = call(default_view, user, key, {"iban": "DE89370400440532013000"})
    other = call(default_view, ApiClient(user.pk), key, {"iban": "mine"})
    assert first.status_code == other.status_code == 201
    assert b"DE89" not in other.content and "Idempotent-Replayed" not in other
    assert runs.count - before == 2
    assert call(default_view, user, key, {"iban": "DE89370400440532013000"}).content == (
        first.content
    )  # the user's own retry still replays


@pytest.mark.parametrize("anonymous", ["reject", "ignore"])
def test_a_fixed_string_scope_never_shares_records_between_anonymous_callers(
    anonymous: str,
) -> None:
    """Finding 4: a second anonymous client got visitor A's card number and e-mail."""
    key, before = str(uuid.uuid4()), runs.count
    with override_settings(IDEMPOTENCY={"ANONYMOUS": anonymous}):
        for view in (shop_view, empty_view):
            first = call(view, AnonymousUser(), key, {"pan": "4111111111111111"})
            other = call(view, AnonymousUser(), key, {"pan": "5500000000000004"})
            if anonymous == "reject":
                assert first.status_code == other.status_code == 403
            else:
                assert b"4111" not in other.content and "Idempotent-Replayed" not in other
    assert runs.count - before == (0 if anonymous == "reject" else 4)
    assert not IdempotencyRecord.objects.filter(key=key).exists()


def test_a_fixed_string_scope_is_each_callers_own(user: Any, other_user: Any) -> None:
    key = str(uuid.uuid4())
    first = call(shop_view, user, key, {"email": "alice@example.com"})
    other = call(shop_view, other_user, key, {"email": "bob@example.com"})
    assert b"alice" not in other.content and "Idempotent-Replayed" not in other
    again = call(shop_view, user, key, {"email": "alice@example.com"})
    assert again.content == first.content and again["Idempotent-Replayed"] == "true"
    scopes = set(IdempotencyRecord.objects.filter(key=key).values_list("scope", flat=True))
    assert scopes == {f"shop/auth.user:{user.pk}", f"shop/auth.user:{other_user.pk}"}


def test_a_shared_scope_is_explicit_and_shared_by_everyone(user: Any) -> None:
    key = str(uuid.uuid4())
    first = call(shared_view, AnonymousUser(), key, {"sku": "catalogue-1"})
    again = call(shared_view, user, key, {"sku": "catalogue-1"})
    assert again.content == first.content and again["Idempotent-Replayed"] == "true"
    assert IdempotencyRecord.objects.get(key=key).scope == "shop"
    with pytest.raises(ValueError, match="non-empty"):
        shared("")


def test_records_of_the_old_user_scope_are_renamed_by_the_command(user: Any) -> None:
    """The upgrade: a record stored as ``user:<pk>`` replays again once renamed."""
    key, before = str(uuid.uuid4()), runs.count
    call(default_view, user, key, {"iban": "DE89"})
    record = IdempotencyRecord.objects.get(key=key)
    IdempotencyRecord.objects.filter(pk=record.pk).update(scope=f"user:{user.pk}")
    taken = IdempotencyRecord.objects.create(
        **{
            f.name: getattr(record, f.name)
            for f in IdempotencyRecord._meta.concrete_fields
            if f.name not in {"id", "key", "scope"}
        },
        scope=f"user:{user.pk}",
        key=key + "-taken",
    )
    IdempotencyRecord.objects.create(
        **{
            f.name: getattr(record, f.name)
            for f in IdempotencyRecord._meta.concrete_fields
            if f.name not in {"id", "key", "scope"}
        },
        scope=f"auth.user:{user.pk}",
        key=key + "-taken",
    )
    call_command("idempotency_rename_scopes", "--dry-run")
    assert IdempotencyRecord.objects.get(pk=record.pk).scope == f"user:{user.pk}"
    call_command("idempotency_rename_scopes")
    assert IdempotencyRecord.objects.get(pk=record.pk).scope == f"auth.user:{user.pk}"
    assert IdempotencyRecord.objects.get(pk=taken.pk).scope == f"user:{user.pk}"  # left
    again = call(default_view, user, key, {"iban": "DE89"})
    assert again["Idempotent-Replayed"] == "true"
    assert runs.count - before == 1


# -- issue 43, finding 4: tenants in databases of their own --------------------------------


def _user_in(alias: str, pk: int, name: str) -> Any:
    """The user with primary key ``pk`` in the database ``alias``, as a router loads it."""
    from django.contrib.auth import get_user_model

    model = get_user_model()
    model.objects.using(alias).filter(pk=pk).delete()
    model.objects.using(alias).create(pk=pk, username=name, password="!")
    return model.objects.using(alias).get(pk=pk)


@pytest.mark.server_db  # two real databases: "ledger" is a second PostgreSQL or MySQL one
@pytest.mark.django_db(databases=["default", "ledger"])
@pytest.mark.parametrize("variant", variant_params("db-lease", "redis", "cache"))
def test_two_databases_users_with_one_pk_never_share_records(variant: str) -> None:
    """A database per tenant: tenant B's user 7001 replayed tenant A's payment (same key
    and body), and got a 422 for another body, an oracle on A's live keys."""
    alice, bob = _user_in("default", 7001, "alice-a"), _user_in("ledger", 7001, "bob-b")
    assert (alice.pk, alice._state.db, bob._state.db) == (7001, "default", "ledger")
    replayed, probed, before = str(uuid.uuid4()), str(uuid.uuid4()), runs.count
    iban = {"iban": "DE89370400440532013000"}
    with override_settings(IDEMPOTENCY=STORE_VARIANTS[variant]):
        first = call(default_view, alice, replayed, iban)
        call(default_view, alice, probed, iban)
        same = call(default_view, bob, replayed, iban)  # alice's key and body
        oracle = call(default_view, bob, probed, {"iban": "mine"})  # alice's key, his body
        again = call(default_view, alice, replayed, iban)
    assert first.status_code == same.status_code == oracle.status_code == 201
    assert "Idempotent-Replayed" not in same and "Idempotent-Replayed" not in oracle
    assert again["Idempotent-Replayed"] == "true" and again.content == first.content
    assert runs.count - before == 4
    assert user_scope(SimpleNamespace(user=bob)) == "auth.user@ledger:7001"  # type: ignore[arg-type]
    assert user_scope(SimpleNamespace(user=alice)) == "auth.user:7001"  # type: ignore[arg-type]


def test_tenant_schema_scope_needs_django_tenants_backend(user: Any) -> None:
    from django.core.exceptions import ImproperlyConfigured

    from idempotency.scopes import tenant_schema_scope

    request = rf.post("/")
    request.user = AnonymousUser()
    assert tenant_schema_scope(request) is None  # anonymous, as the default scope
    request.user = user
    with pytest.raises(ImproperlyConfigured, match="django-tenants"):
        tenant_schema_scope(request)  # this test database is no django-tenants one
