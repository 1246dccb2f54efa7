"""The app (idempotency/contrib/ninja/apps.py): ``ready()`` registers Django Ninja with
the HTTP interfaces, once however often it runs."""

from __future__ import annotations

from django.apps import apps

from idempotency.contrib.ninja import DjangoNinja
from idempotency.http import views


def registered() -> int:
    return sum(isinstance(framework, DjangoNinja) for framework in views._registered)


def test_ready_registers_ninja_once() -> None:
    assert registered() == 1
    apps.get_app_config("idempotency_ninja").ready()
    assert registered() == 1
