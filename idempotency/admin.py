"""Admin for idempotency records: a read-only audit view with release and purge actions.

Records are written by the stores only, so the admin never adds or edits one.
Superusers may *release* records (delete them through the store, so a cached
response is forgotten too) and purge the expired ones. Subclass
:class:`IdempotencyRecordAdmin` to change it::

    admin.site.unregister(IdempotencyRecord)

    @admin.register(IdempotencyRecord)
    class MyRecordAdmin(IdempotencyRecordAdmin):
        preview_limit = 16384

Django's admin autodiscovery imports this module, which registers the records' admin and
the submit tokens' (read-only: only their hashes are stored).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.models import DELETION, LogEntry
from django.contrib.admin.utils import flatten_fieldsets
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, QueryDict
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.timesince import timeuntil
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from idempotency.codecs import UndecodableBody, unseal
from idempotency.models import IdempotencyRecord, SubmitToken
from idempotency.stores.database import database_store, purge_expired_records
from idempotency.stores.records import StoredResponse, authentic

if TYPE_CHECKING:
    _ModelAdmin = admin.ModelAdmin[IdempotencyRecord]
    _TokenAdmin = admin.ModelAdmin[SubmitToken]
else:
    _ModelAdmin = _TokenAdmin = admin.ModelAdmin


def body_preview(body: bytes, *, limit: int = 4096, hex_bytes: int = 64) -> str:
    """A readable, bounded rendering of a stored response body (plain text, not escaped).

    JSON is pretty-printed, other UTF-8 text is shown as is, anything else as a
    byte count and a hex dump of its first ``hex_bytes`` bytes. Text longer than
    ``limit`` characters is cut with a note of the body's full size.
    """
    size = len(body)
    if not body:
        return gettext("(empty body)")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and not _is_text(text):
        text = None
    if text is None:
        head = body[:hex_bytes]
        lines = [
            f"{offset:08x}  {head[offset : offset + 16].hex(' ')}"
            for offset in range(0, len(head), 16)
        ]
        more = "\n…" if size > hex_bytes else ""
        label = ngettext("<%(n)d byte of binary data>", "<%(n)d bytes of binary data>", size)
        return label % {"n": size} + "\n" + "\n".join(lines) + more
    with contextlib.suppress(ValueError):
        text = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    if len(text) > limit:
        note = gettext("… (truncated, %(n)d bytes)") % {"n": size}
        text = text[:limit] + "\n" + note
    return text


def _is_text(text: str) -> bool:
    """Whether decoded UTF-8 is printable text rather than binary that happens to decode."""
    return all(char.isprintable() or char in "\t\n\r" for char in text[:4096])


class ExpiredListFilter(admin.SimpleListFilter):
    """Records past their TTL (treated as absent, waiting for the purge) or still live."""

    title = _("expiry")
    parameter_name = "expiry"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, Any]]:
        return [("live", _("live")), ("expired", _("expired"))]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        if value == "expired":
            return queryset.filter(expires_at__lte=timezone.now())
        if value == "live":
            return queryset.filter(expires_at__gt=timezone.now())
        return queryset


#: The admin log's message for a released record.
RELEASE_MESSAGE = "Released: the record was deleted, so its key may run again."


@admin.register(IdempotencyRecord)
class IdempotencyRecordAdmin(_ModelAdmin):
    """Read-only view of idempotency records; subclass it to customise."""

    #: Characters of a response body shown on the detail page.
    preview_limit = 4096
    #: Bytes of a binary response body shown as hex.
    hex_preview_bytes = 64
    #: Actions that act on all records, so they run even with nothing selected.
    selection_free_actions: tuple[str, ...] = ("purge_expired",)

    # five columns, so the list fits a 1280-pixel screen beside the admin's sidebar and
    # the filters (the creation date is the date hierarchy above it)
    list_display = ("key", "scope", "outcome", "request_line", "expires")
    list_filter = ("state", "status_code", "method", ExpiredListFilter)
    search_fields = ("^key", "^scope")
    date_hierarchy = "created_at"
    ordering = ("-created_at",)
    # the table can hold millions of rows: never count them all on every page view
    show_full_result_count = False
    actions = ("release_records", "purge_expired")
    #: The permission that shows stored bodies, headers and recovery data (``Meta.permissions``).
    body_permission = "idempotency.view_idempotencyrecord_body"
    #: What only :attr:`body_permission` shows: what the callers were sent.
    body_fields = ("headers_table", "response_preview", "recovery_data")
    # the fingerprint is never shown: keyed as it is, it still says nothing an operator needs
    fieldsets = (
        (
            None,
            {"fields": ("scope", "key", "state", "expired", "method", "route")},
        ),
        (
            _("Response"),
            {"fields": ("status_code", "authentic", "headers_table", "response_preview")},
        ),
        (
            _("Lifetime"),
            {"fields": ("created_at", "completed_at", "expires_at", "lease_expires_at")},
        ),
        (
            _("Ownership and recovery"),
            {
                "classes": ("collapse",),
                "fields": ("fence", "recovery_point", "recovery_data"),
            },
        ),
    )
    readonly_fields = flatten_fieldsets(fieldsets)  # every field shown, none editable

    # -- permissions: view for staff with the view permission, release for superusers --

    def has_body_permission(self, request: HttpRequest) -> bool:
        """Whether ``request.user`` may read stored bodies (:attr:`body_permission`)."""
        return bool(request.user.has_perm(self.body_permission))

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> Any:
        fieldsets = super().get_fieldsets(request, obj)
        if self.has_body_permission(request):
            return fieldsets
        hidden = set(self.body_fields)
        kept = []
        for name, options in fieldsets:
            fields = [f for f in options["fields"] if f not in hidden]
            if fields:
                kept.append((name, {**options, "fields": fields}))
        return kept

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        fields = super().get_readonly_fields(request, obj)
        if self.has_body_permission(request):
            return fields
        return [f for f in fields if f not in self.body_fields]

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(
        self, request: HttpRequest, obj: IdempotencyRecord | None = None
    ) -> bool:
        return False

    def has_delete_permission(
        self, request: HttpRequest, obj: IdempotencyRecord | None = None
    ) -> bool:
        # deleting goes through the actions only (they use the store), never the detail page
        return obj is None and bool(getattr(request.user, "is_superuser", False))

    def get_actions(self, request: HttpRequest, action_location: Any = None) -> dict[str, Any]:
        # Django 6.1 passes where the actions show (``admin.ActionLocation``) and deprecates
        # overrides without the parameter; 5.2 and 6.0 call get_actions(request) alone
        where = {} if action_location is None else {"action_location": action_location}
        actions = super().get_actions(request, **where)
        # "Release selected records" deletes through the store; the generic delete would not
        actions.pop("delete_selected", None)
        return actions

    # -- columns and detail fields ----------------------------------------------------

    @admin.display(boolean=True, description=_("expired"))
    def expired(self, obj: IdempotencyRecord) -> bool:
        return obj.expires_at <= timezone.now()

    @admin.display(boolean=True, description=_("authentic"))
    def authentic(self, obj: IdempotencyRecord) -> bool | None:
        """Whether a completed record's tag verifies (``None`` while in progress): one that
        does not is never replayed (``idempotency-record-forged``)."""
        if not obj.is_completed:
            return None
        stored = StoredResponse.from_parts(
            obj.status_code or 0, obj.response_headers, obj.response_body
        )
        return authentic(
            obj.scope, obj.key, tag=obj.mac, fingerprint=obj.fingerprint, fence=obj.fence,
            stored=stored,
        )  # fmt: skip

    @admin.display(description=_("outcome"), ordering="status_code")
    def outcome(self, obj: IdempotencyRecord) -> str:
        """The state, and the stored status once completed: ``completed 201``."""
        state = obj.get_state_display()
        return f"{state} {obj.status_code}" if obj.status_code is not None else str(state)

    @admin.display(description=_("request"), ordering="route")
    def request_line(self, obj: IdempotencyRecord) -> str:
        return f"{obj.method} {obj.route}".strip()

    @admin.display(description=_("expires"), ordering="expires_at")
    def expires(self, obj: IdempotencyRecord) -> str:
        """``in 23 hours``, or ``expired`` (the key may run again)."""
        now = timezone.now()
        if obj.expires_at <= now:
            return str(_("expired"))
        return str(_("in %(time)s") % {"time": timeuntil(obj.expires_at, now, depth=1)})

    @admin.display(description=_("response headers"))
    def headers_table(self, obj: IdempotencyRecord) -> SafeString | str:
        headers = obj.response_headers or []
        rows: Iterable[tuple[str, str]] = [
            (str(pair[0]), str(pair[1]))
            for pair in headers
            if isinstance(pair, list | tuple) and len(pair) == 2
        ]
        if not rows:
            return self.get_empty_value_display()
        return format_html(
            "<table><tbody>{}</tbody></table>",
            format_html_join("", "<tr><th>{}</th><td>{}</td></tr>", rows),
        )

    @admin.display(description=_("response body"))
    def response_preview(self, obj: IdempotencyRecord) -> SafeString | str:
        if obj.response_body is None:
            return self.get_empty_value_display()
        try:  # stored through BODY_CODEC (encrypted, for instance)
            body = unseal(obj.response_body)
        except UndecodableBody:
            return gettext("(unreadable: the body does not decode with BODY_CODEC)")
        preview = body_preview(body, limit=self.preview_limit, hex_bytes=self.hex_preview_bytes)
        return format_html(
            '<pre class="idempotency-response-preview" style="white-space: pre-wrap; '
            'max-height: 40em; overflow: auto; margin: 0">{}</pre>',
            preview,
        )

    # -- actions ----------------------------------------------------------------------

    @admin.action(
        permissions=["delete"],
        description=_("Release selected records"),
    )
    def release_records(self, request: HttpRequest, queryset: QuerySet[IdempotencyRecord]) -> None:
        """Delete the selected records through the store (their keys may run again), each
        release audited as a deletion in the admin log (``LogEntry``)."""
        store = database_store(queryset.db)
        released = 0
        batch: list[IdempotencyRecord] = []
        for record in queryset.only("pk", "scope", "key", "state").iterator(chunk_size=500):
            if store.delete(record.scope, record.key):
                released += 1
                batch.append(record)
            if len(batch) >= 500:
                self._audit(request, batch, RELEASE_MESSAGE)
                batch = []
        self._audit(request, batch, RELEASE_MESSAGE)
        self.message_user(
            request,
            ngettext("Released %(n)d record.", "Released %(n)d records.", released)
            % {"n": released},
            messages.SUCCESS,
        )

    @admin.action(
        permissions=["delete"],
        description=_("Purge expired records"),
    )
    def purge_expired(self, request: HttpRequest, queryset: QuerySet[IdempotencyRecord]) -> None:
        result = purge_expired_records(using=queryset.db)
        # one entry for the whole purge: it deletes by expiry, possibly millions of rows
        LogEntry.objects.create(
            user_id=_user_id(request),
            content_type=ContentType.objects.get_for_model(IdempotencyRecord),
            object_id=None,
            object_repr=gettext("expired idempotency records"),
            action_flag=DELETION,
            change_message=gettext("Purged %(n)d expired records.") % {"n": result.deleted},
        )
        self.message_user(
            request,
            ngettext(
                "Purged %(n)d expired record in %(s).2f s.",
                "Purged %(n)d expired records in %(s).2f s.",
                result.deleted,
            )
            % {"n": result.deleted, "s": result.seconds},
            messages.SUCCESS,
        )

    def _audit(self, request: HttpRequest, records: list[IdempotencyRecord], message: str) -> None:
        """One deletion ``LogEntry`` per record (``LogEntry.objects.log_actions``: Django
        5.1+, where ``log_deletion`` is deprecated, and removed in 6.0)."""
        if not records:
            return
        LogEntry.objects.log_actions(
            user_id=_user_id(request),
            queryset=records,
            action_flag=DELETION,
            change_message=message,
        )

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        # Django runs an action only on a selection; purge acts on every expired record,
        # so let it run with nothing selected as if "select all" had been chosen.
        if (
            request.method == "POST"
            and "index" in request.POST
            and not request.POST.getlist(helpers.ACTION_CHECKBOX_NAME)
            and self._posted_action(request) in self.selection_free_actions
        ):
            post = request.POST.copy()
            post["select_across"] = "1"
            # immutable again, as Django parses a request's POST
            request.POST = QueryDict(post.urlencode(), encoding=post.encoding)
            response = self.response_action(request, queryset=self.get_queryset(request))
            if response is not None:
                return response
            return HttpResponseRedirect(request.get_full_path())
        return super().changelist_view(request, extra_context)

    @staticmethod
    def _posted_action(request: HttpRequest) -> str:
        """The action named by the button that was pushed (the admin has one per form)."""
        try:
            index = int(request.POST.get("index", 0))
        except ValueError:
            index = 0
        chosen = request.POST.getlist("action")
        return chosen[index] if 0 <= index < len(chosen) else ""


def _user_id(request: HttpRequest) -> int | str:
    """The primary key of the admin user acting (the admin site lets in no anonymous user)."""
    user = request.user
    if not user.is_authenticated:  # pragma: no cover - the admin site refused it already
        raise PermissionDenied
    pk: int | str = user.pk  # Model.pk is Any in django-stubs
    return pk


@admin.register(SubmitToken)
class SubmitTokenAdmin(_TokenAdmin):
    """Read-only view of one-time submit tokens (only their hashes are stored)."""

    list_display = ("purpose", "scope", "created_at", "expires_at", "consumed_at")
    list_filter = ("purpose",)
    search_fields = ("=scope", "purpose")
    date_hierarchy = "created_at"
    ordering = ("-created_at",)
    readonly_fields = ("token_hash", "scope", "purpose", "created_at", "expires_at", "consumed_at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: SubmitToken | None = None) -> bool:
        return False


__all__ = [
    "RELEASE_MESSAGE",
    "ExpiredListFilter",
    "IdempotencyRecordAdmin",
    "SubmitTokenAdmin",
    "body_preview",
]
