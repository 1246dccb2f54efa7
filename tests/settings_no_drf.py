"""Test settings without Django REST framework (the ``no-drf`` group: .ci/run's core stream).

``tests/settings.py``'s project (databases, caches, stores, the sample's middleware), less
what needs DRF: DRF and drf-spectacular, the sample's apps (their views are DRF's) and its
URLs, and the extras that group leaves out (Prometheus and OpenTelemetry). The tests'
URLs (tests/urls.py) serve the test app's plain Django views and Django Ninja's APIs.
The main suite's tests of functions, Django's tasks and plain Django views run on it
(``NO_DRF_TESTS`` in .ci/run names the files)."""

from __future__ import annotations

from tests.settings import *  # noqa: F403
from tests.settings import IDEMPOTENCY

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "idempotency",
    "idempotency.contrib.ninja",
    "tests.testapp",
    "django_tasks_db",
]
ROOT_URLCONF = "tests.urls"  # the sample's, config.urls, are DRF's
IDEMPOTENCY = {**IDEMPOTENCY, "METRICS": False}  # prometheus-client is not installed
