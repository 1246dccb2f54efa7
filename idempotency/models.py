"""The record of one idempotency key: who claimed it, and the response to replay."""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _


class RecordState(models.TextChoices):
    IN_PROGRESS = "in_progress", _("in progress")
    COMPLETED = "completed", _("completed")


class IdempotencyRecord(models.Model):
    """One claimed key. Never holds the request body, only what replay needs.

    ``(scope, key)`` is unique: the database, not a check in Python, decides
    which of two concurrent requests with one key wins.
    """

    scope = models.CharField(_("scope"), max_length=255)
    key = models.CharField(_("key"), max_length=255)
    fingerprint = models.CharField(_("request fingerprint"), max_length=64)
    state = models.CharField(
        _("state"), max_length=16, choices=RecordState.choices, default=RecordState.IN_PROGRESS
    )
    fence = models.BigIntegerField(
        _("fencing token"),
        default=0,
        help_text=_("Unique per claim; completing or releasing must present it."),
    )
    lease_expires_at = models.DateTimeField(_("lease expires at"), null=True, blank=True)
    method = models.CharField(_("method"), max_length=10, blank=True, default="")
    route = models.CharField(_("route"), max_length=255, blank=True, default="")
    status_code = models.PositiveSmallIntegerField(_("response status"), null=True, blank=True)
    response_headers = models.JSONField(_("response headers"), default=list, blank=True)
    response_body = models.BinaryField(_("response body"), null=True, blank=True)
    mac = models.CharField(
        _("record authenticator"),
        max_length=96,
        blank=True,
        default="",
        # in the table too: rows inserted by code that predates the column (a rolling
        # deploy's old processes, raw SQL) get a blank tag, refused as forged once completed
        db_default="",
        help_text=_(
            "The completed record's expiry and HMAC-SHA256 under a key derived from "
            "SECRET_KEY: a record that does not match it is never replayed."
        ),
    )
    recovery_point = models.CharField(_("recovery point"), max_length=64, blank=True, default="")
    recovery_data = models.JSONField(_("recovery data"), null=True, blank=True)
    created_at = models.DateTimeField(_("created at"))
    completed_at = models.DateTimeField(_("completed at"), null=True, blank=True)
    expires_at = models.DateTimeField(_("expires at"))

    class Meta:
        verbose_name = _("idempotency record")
        verbose_name_plural = _("idempotency records")
        # the stored responses hold what the callers were sent (card data, IBANs, e-mail):
        # the view permission alone shows a record's metadata, never its body
        permissions = [
            ("view_idempotencyrecord_body", _("Can view the stored bodies of idempotency records")),
        ]
        constraints = [
            models.UniqueConstraint(fields=["scope", "key"], name="idempotency_record_scope_key"),
        ]
        indexes = [
            models.Index(fields=["expires_at"], name="idempotency_record_expires"),
            models.Index(fields=["created_at"], name="idempotency_record_created"),
        ]

    def __str__(self) -> str:
        return f"{self.scope} / {self.key} ({self.state})"

    @property
    def is_completed(self) -> bool:
        return self.state == RecordState.COMPLETED


class SubmitToken(models.Model):
    """A one-time submit token of the database backend (``idempotency.tokens.DatabaseTokens``).

    Only the SHA-256 hash of the token is stored, bound to the scope it was issued to
    (``user:<pk>``) and its purpose. Consuming it is one conditional ``UPDATE`` that sets
    ``consumed_at``; the consumed row stays behind as a tombstone, so a second use is told
    apart from a token that never existed.
    """

    token_hash = models.CharField(_("token hash"), max_length=64, unique=True)
    scope = models.CharField(_("scope"), max_length=255)
    purpose = models.CharField(_("purpose"), max_length=100)
    created_at = models.DateTimeField(_("created at"))
    expires_at = models.DateTimeField(_("expires at"))
    consumed_at = models.DateTimeField(_("consumed at"), null=True, blank=True)

    class Meta:
        verbose_name = _("submit token")
        verbose_name_plural = _("submit tokens")
        indexes = [
            models.Index(fields=["expires_at"], name="idempotency_token_expires"),
        ]

    def __str__(self) -> str:
        state = "consumed" if self.consumed_at else "open"
        return f"{self.scope} / {self.purpose} ({state})"


class RecordQuota(models.Model):
    """How many new records one scope has made in one window (``MAX_NEW_RECORDS``): the
    counter of :class:`~idempotency.stores.database.DatabaseStore`, one row per (scope, window),
    incremented by one atomic upsert and purged with the expired records."""

    scope = models.CharField(_("scope"), max_length=255)
    window = models.BigIntegerField(
        _("window"), help_text=_("Start of the window, in epoch seconds.")
    )
    count = models.PositiveIntegerField(_("new records"), default=0)
    expires_at = models.DateTimeField(_("expires at"))

    class Meta:
        verbose_name = _("record quota")
        verbose_name_plural = _("record quotas")
        constraints = [
            models.UniqueConstraint(fields=["scope", "window"], name="idempotency_quota_window"),
        ]
        indexes = [models.Index(fields=["expires_at"], name="idempotency_quota_expires")]

    def __str__(self) -> str:
        return f"{self.scope} @ {self.window}: {self.count}"
