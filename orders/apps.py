"""App configuration of the sample orders app."""

from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class OrdersConfig(AppConfig):
    name = "orders"
    verbose_name = _("Orders")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # registers the outbox's consumer with Celery: the outbox publishes to it by name
        from orders import tasks  # noqa: F401
