"""The app that lets ``@idempotent`` and the middleware serve DRF's views."""

from __future__ import annotations

from django.apps import AppConfig


class DjangoRestFrameworkConfig(AppConfig):
    name = "idempotency.contrib.drf"
    label = "idempotency_drf"
    verbose_name = "Idempotency: Django REST framework"

    def ready(self) -> None:
        from idempotency.contrib.drf.mixins import DjangoRestFramework
        from idempotency.http.views import register

        register(DjangoRestFramework())
