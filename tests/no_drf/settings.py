"""A Django project that serves a Django Ninja API with django-idempotency and has no
Django REST framework installed (the ``no-drf`` dependency group)."""

from __future__ import annotations

from tests.no_extras.settings import *  # noqa: F403 - the same plain project

INSTALLED_APPS = [*INSTALLED_APPS, "idempotency.contrib.ninja"]  # noqa: F405
ROOT_URLCONF = "tests.no_drf.urls"
