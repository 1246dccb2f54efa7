"""The admin (idempotency.admin): the read-only records admin (its list, detail, release and
purge actions), the preview of a stored body, and the read-only submit tokens admin."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.test import Client, override_settings
from django.urls import reverse

from idempotency.admin import body_preview
from idempotency.models import IdempotencyRecord
from idempotency.stores import records
from idempotency.stores.base import StoredResponse
from idempotency.stores.database import DatabaseStore
from tests.support.records import MakeRecord
from tests.support.stores import DB_STORE, using

pytestmark = pytest.mark.django_db


def test_preview_of_json_text_binary_and_empty_bodies() -> None:
    assert body_preview(b'{"b":1,"a":[true]}') == '{\n  "b": 1,\n  "a": [\n    true\n  ]\n}'
    assert body_preview("héllo\nworld".encode()) == "héllo\nworld"
    assert body_preview(b"") == "(empty body)"
    binary = body_preview(b"\x89PNG\r\n\x1a\n" + b"\x00" * 100)
    assert binary.startswith("<108 bytes of binary data>\n00000000  89 50 4e 47 0d 0a 1a 0a")
    assert binary.endswith("\n…")
    assert body_preview(b"\x01") == "<1 byte of binary data>\n00000000  01"


def test_preview_truncates_long_bodies() -> None:
    body = json.dumps([{"n": i} for i in range(2000)]).encode()

    preview = body_preview(body, limit=4096)

    assert preview.startswith('[\n  {\n    "n": 0\n  },')
    assert preview.endswith(f"\n… (truncated, {len(body)} bytes)")
    assert len(preview) < 4200

    text = body_preview(b"x" * 10000, limit=100)
    assert text == "x" * 100 + "\n… (truncated, 10000 bytes)"


def test_stored_responses_preview_as_the_store_wrote_them() -> None:
    # a record completed through the store API renders like one made by hand
    store = DatabaseStore()
    claim = store.claim("user:1", "via-store", fingerprint="f" * 64, lease=60, ttl=60)
    response = StoredResponse(201, [("Content-Type", "application/json")], b'{"ok":true}')
    assert store.complete("user:1", "via-store", fence=claim.fence, response=response, ttl=60)

    obj = IdempotencyRecord.objects.get(key="via-store")

    assert body_preview(bytes(obj.response_body or b"")) == '{\n  "ok": true\n}'


pytestmark = pytest.mark.django_db

CHANGELIST = reverse("admin:idempotency_idempotencyrecord_changelist")


def change_url(obj: IdempotencyRecord) -> str:
    return reverse("admin:idempotency_idempotencyrecord_change", args=[obj.pk])


def html(response: Any) -> str:
    return str(response.content.decode())


# -- the list ---------------------------------------------------------------------------


def test_changelist_lists_records(admin_client: Client, make_record: MakeRecord) -> None:
    make_record(key="order-abc-123", scope="user:7")

    response = admin_client.get(CHANGELIST)

    assert response.status_code == 200
    page = html(response)
    assert "order-abc-123" in page
    assert "user:7" in page
    assert "/api/orders/" in page


def test_search_by_key_prefix_and_scope(admin_client: Client, make_record: MakeRecord) -> None:
    make_record(key="order-abc-123", scope="user:7")
    make_record(key="payment-xyz-9", scope="user:8")

    by_key = html(admin_client.get(CHANGELIST, {"q": "order-abc"}))
    assert "order-abc-123" in by_key
    assert "payment-xyz-9" not in by_key

    by_scope = html(admin_client.get(CHANGELIST, {"q": "user:8"}))
    assert "payment-xyz-9" in by_scope
    assert "order-abc-123" not in by_scope


@pytest.mark.parametrize(
    ("query", "shown", "hidden"),
    [
        ({"expiry": "expired"}, "old-key", "live-key"),
        ({"expiry": "live"}, "live-key", "old-key"),
        ({"state__exact": "in_progress"}, "live-key", "old-key"),
        ({"state__exact": "completed"}, "old-key", "live-key"),
        ({"status_code__exact": "422"}, "old-key", "live-key"),
        ({"method__exact": "PUT"}, "live-key", "old-key"),
    ],
)
def test_filters(
    admin_client: Client,
    make_record: MakeRecord,
    query: dict[str, str],
    shown: str,
    hidden: str,
) -> None:
    make_record(key="old-key", expired=True, status_code=422)
    make_record(
        key="live-key", state="in_progress", method="PUT", status_code=None, response_body=None
    )

    response = admin_client.get(CHANGELIST, query)

    assert response.status_code == 200
    page = html(response)
    assert shown in page
    assert hidden not in page


def test_the_list_says_when_each_record_expires(
    admin_client: Client, make_record: MakeRecord
) -> None:
    make_record(key="old-key", expired=True)
    make_record(key="live-key")

    page = html(admin_client.get(CHANGELIST))

    expires = dict(re.findall(r'>([a-z]+-key)</a>.*?class="field-expires">([^<]*)<', page, re.S))
    assert expires["old-key"] == "expired"
    assert expires["live-key"].startswith("in 23\xa0hours")  # made with the 24 h TTL


# -- the detail page ----------------------------------------------------------------------


def test_detail_shows_pretty_json_and_headers(
    admin_client: Client, make_record: MakeRecord
) -> None:
    body = json.dumps({"id": 42, "items": [1, 2], "note": "<b>bold</b>"}).encode()
    obj = make_record(
        key="order-abc-123",
        body=body,
        headers=[["Content-Type", "application/json"], ["Location", "/api/orders/42/"]],
    )

    response = admin_client.get(change_url(obj))

    assert response.status_code == 200
    page = html(response)
    assert "order-abc-123" in page
    assert "&quot;items&quot;: [\n    1,\n    2\n  ]," in page
    assert "&lt;b&gt;bold&lt;/b&gt;" in page  # escaped, never rendered
    assert "<b>bold</b>" not in page
    assert "<th>Location</th><td>/api/orders/42/</td>" in page
    # read-only: no form inputs for the record's fields, no save button
    assert 'name="key"' not in page
    assert 'name="_save"' not in page


def test_detail_shows_a_binary_preview(admin_client: Client, make_record: MakeRecord) -> None:
    obj = make_record(body=bytes(range(256)), headers=[["Content-Type", "image/png"]])

    page = html(admin_client.get(change_url(obj)))

    assert "&lt;256 bytes of binary data&gt;" in page
    assert "00000000  00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f" in page
    assert "00000030  30 31" in page
    assert "00000040" not in page  # 64 bytes shown, no more


def test_detail_says_whether_the_record_is_authentic(
    admin_client: Client, make_record: MakeRecord
) -> None:
    """Issue 43: the detail page shows whether a completed record's tag verifies, so an
    operator answering a ``record_forged`` alert sees which record was tampered with."""
    genuine = make_record(key="genuine")
    forged = make_record(key="forged")
    IdempotencyRecord.objects.filter(pk=forged.pk).update(status_code=200)

    def authentic(obj: IdempotencyRecord) -> str:
        page = html(admin_client.get(change_url(obj)))
        found = re.search(r"field-authentic.*?<img src=\"[^\"]*icon-(yes|no)", page, re.S)
        assert found is not None
        return found.group(1)

    assert authentic(genuine) == "yes"
    assert authentic(forged) == "no"


def test_add_page_is_forbidden(admin_client: Client) -> None:
    response = admin_client.get(reverse("admin:idempotency_idempotencyrecord_add"))

    assert response.status_code == 403


def test_change_form_is_read_only(admin_client: Client, make_record: MakeRecord) -> None:
    obj = make_record(key="order-abc-123", status_code=201)

    response = admin_client.post(
        change_url(obj), {"key": "hijacked", "status_code": "500", "_save": "Save"}
    )

    assert response.status_code == 403
    obj.refresh_from_db()
    assert (obj.key, obj.status_code) == ("order-abc-123", 201)


def test_delete_page_is_not_available(admin_client: Client, make_record: MakeRecord) -> None:
    obj = make_record()

    response = admin_client.post(
        reverse("admin:idempotency_idempotencyrecord_delete", args=[obj.pk]), {"post": "yes"}
    )

    assert response.status_code == 403
    assert IdempotencyRecord.objects.filter(pk=obj.pk).exists()


# -- actions ------------------------------------------------------------------------------


def test_release_action_deletes_the_selected_records(
    admin_client: Client, make_record: MakeRecord
) -> None:
    chosen = make_record(key="stuck-key", state="in_progress", response_body=None)
    other = make_record(key="other-key")

    response = admin_client.post(
        CHANGELIST,
        {"action": "release_records", "_selected_action": [chosen.pk], "index": "0"},
        follow=True,
    )

    assert response.status_code == 200
    assert "Released 1 record." in html(response)
    assert not IdempotencyRecord.objects.filter(pk=chosen.pk).exists()
    assert IdempotencyRecord.objects.filter(pk=other.pk).exists()


@override_settings(IDEMPOTENCY=using(DB_STORE, response_cache="default"))
def test_release_action_forgets_the_cached_response(
    admin_client: Client, make_record: MakeRecord
) -> None:
    obj = make_record(key="cached-key")
    responses = DatabaseStore(response_cache="default").response_cache
    assert responses is not None
    cache_key = responses.key(obj.scope, obj.key)
    cached = StoredResponse(201, [], b"{}")
    tag = records.sign(
        obj.scope, obj.key, fingerprint=obj.fingerprint, fence=obj.fence, stored=cached, ttl=60
    )
    responses.put(obj.scope, obj.key, obj.fingerprint, cached, 60, fence=obj.fence, tag=tag)
    assert responses.raw().get(cache_key) is not None
    store = DatabaseStore(response_cache="default")
    assert store.lookup(obj.scope, obj.key, fingerprint=obj.fingerprint) is not None

    admin_client.post(
        CHANGELIST, {"action": "release_records", "_selected_action": [obj.pk], "index": "0"}
    )

    assert responses.raw().get(cache_key) is None
    assert store.lookup(obj.scope, obj.key, fingerprint=obj.fingerprint) is None


def test_purge_action_runs_without_a_selection(
    admin_client: Client, make_record: MakeRecord
) -> None:
    make_record(key="old-1", expired=True)
    make_record(key="old-2", expired=True)
    make_record(key="live-key")

    response = admin_client.post(CHANGELIST, {"action": "purge_expired", "index": "0"}, follow=True)

    assert response.status_code == 200
    assert "Purged 2 expired records" in html(response)
    assert list(IdempotencyRecord.objects.values_list("key", flat=True)) == ["live-key"]


def test_purge_action_ignores_the_selection(admin_client: Client, make_record: MakeRecord) -> None:
    make_record(key="old-1", expired=True)
    live = make_record(key="live-key")

    admin_client.post(
        CHANGELIST, {"action": "purge_expired", "_selected_action": [live.pk], "index": "0"}
    )

    assert list(IdempotencyRecord.objects.values_list("key", flat=True)) == ["live-key"]


def test_the_generic_delete_action_is_not_offered(admin_client: Client) -> None:
    page = html(admin_client.get(CHANGELIST))

    assert 'value="release_records"' in page
    assert 'value="purge_expired"' in page
    assert 'value="delete_selected"' not in page


def test_staff_without_superuser_can_view_but_not_release(
    client: Client, django_user_model: Any, make_record: MakeRecord
) -> None:
    staff = django_user_model.objects.create_user(username="viewer", password="pw", is_staff=True)
    staff.user_permissions.add(Permission.objects.get(codename="view_idempotencyrecord"))
    client.force_login(staff)
    obj = make_record(key="order-abc-123")
    make_record(key="old-1", expired=True)

    listing = client.get(CHANGELIST)
    assert listing.status_code == 200
    assert "order-abc-123" in html(listing)
    assert 'value="release_records"' not in html(listing)
    assert client.get(change_url(obj)).status_code == 200

    for action in ("release_records", "purge_expired"):
        client.post(CHANGELIST, {"action": action, "_selected_action": [obj.pk], "index": "0"})
    assert IdempotencyRecord.objects.count() == 2


# -- issue 36, finding 7: bodies behind their own permission, audited releases --------------


def _staff(django_user_model: Any, name: str, *codenames: str) -> Any:
    staff = django_user_model.objects.create_user(username=name, password="pw", is_staff=True)
    for codename in codenames:
        staff.user_permissions.add(Permission.objects.get(codename=codename))
    return staff


def test_a_view_only_staff_member_sees_no_body_and_nobody_sees_the_fingerprint(
    client: Client, django_user_model: Any, make_record: MakeRecord
) -> None:
    """A staff member with only the view permission read every user's bodies."""
    body = json.dumps({"iban": "DE89370400440532013000", "email": "alice@example.com"})
    obj = make_record(
        key="pay-1",
        body=body.encode(),
        headers=[["Location", "/api/payments/7/"]],
        recovery_data={"card": "4111111111111111"},
    )
    IdempotencyRecord.objects.filter(pk=obj.pk).update(fingerprint="a1b2c3" * 10 + "d4e5")
    viewer = _staff(django_user_model, "viewer", "view_idempotencyrecord")
    reader = _staff(
        django_user_model, "reader", "view_idempotencyrecord", "view_idempotencyrecord_body"
    )
    pages = {}
    for staff in (viewer, reader):
        client.force_login(staff)
        response = client.get(change_url(obj))
        assert response.status_code == 200
        pages[staff.username] = html(response)
    assert "pay-1" in pages["viewer"]  # the record's metadata stays visible
    for secret in ("DE89370400440532013000", "alice@example.com", "/api/payments/7/", "4111"):
        assert secret not in pages["viewer"]
        assert secret in pages["reader"]
    for page in pages.values():
        assert "a1b2c3a1b2c3" not in page and "fingerprint" not in page.lower()


def test_release_and_purge_write_admin_log_entries(
    admin_client: Client, admin_user: Any, make_record: MakeRecord
) -> None:
    from django.contrib.admin.models import DELETION, LogEntry

    chosen = [make_record(key=f"paid-{n}") for n in range(3)]
    make_record(key="old-1", expired=True)
    make_record(key="old-2", expired=True)
    admin_client.post(
        CHANGELIST,
        {
            "action": "release_records",
            "_selected_action": [r.pk for r in chosen],
            "index": "0",
        },
    )
    released = LogEntry.objects.filter(action_flag=DELETION, object_id__isnull=False)
    assert sorted(released.values_list("object_id", flat=True)) == sorted(str(r.pk) for r in chosen)
    assert {e.user_id for e in released} == {admin_user.pk}
    assert all("may run again" in e.change_message for e in released)

    admin_client.post(CHANGELIST, {"action": "purge_expired", "index": "0"})
    (purge,) = LogEntry.objects.filter(action_flag=DELETION, object_id__isnull=True)
    assert purge.user_id == admin_user.pk and "Purged 2 expired records" in purge.change_message


pytestmark = pytest.mark.django_db


def test_submit_token_admin_is_read_only(admin_client: Any) -> None:
    from idempotency.tokens import issue_submit_token

    issue_submit_token(user_or_scope="user:42", purpose="order-form")
    listing = admin_client.get("/admin/idempotency/submittoken/")
    assert listing.status_code == 200
    assert b"order-form" in listing.content
    assert admin_client.get("/admin/idempotency/submittoken/add/").status_code == 403
