"""The app that lets ``@idempotent`` and the middleware serve Django Ninja's operations."""

from __future__ import annotations

from django.apps import AppConfig


class DjangoNinjaConfig(AppConfig):
    name = "idempotency.contrib.ninja"
    label = "idempotency_ninja"
    verbose_name = "Idempotency: Django Ninja"

    def ready(self) -> None:
        from idempotency.contrib.ninja import DjangoNinja
        from idempotency.http.views import register

        register(DjangoNinja())
