"""Admin for idempotency records: a read-only audit view with release and purge actions.

Records are written by the stores only, so the admin never adds or edits one.
Superusers may *release* records (delete them through the store, so a cached
response is forgotten too) and purge the expired ones. Subclass
:class:`IdempotencyRecordAdmin` to change it::

    admin.site.unregister(IdempotencyRecord)

    @admin.register(IdempotencyRecord)
    class MyRecordAdmin(IdempotencyRecordAdmin):
        preview_limit = 16384

Django's admin autodiscovery imports this package, which registers the records' admin
(:mod:`~idempotency.admin.records`) and the submit tokens' (:mod:`~idempotency.admin.tokens`);
:mod:`~idempotency.admin.previews` renders a stored body.
"""

from __future__ import annotations

from idempotency.admin.previews import body_preview
from idempotency.admin.records import RELEASE_MESSAGE, ExpiredListFilter, IdempotencyRecordAdmin
from idempotency.admin.tokens import SubmitTokenAdmin

__all__ = [
    "RELEASE_MESSAGE",
    "ExpiredListFilter",
    "IdempotencyRecordAdmin",
    "SubmitTokenAdmin",
    "body_preview",
]
