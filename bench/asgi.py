"""ASGI entry point of the benchmark's uvicorn servers (``bench.asgi:application``)."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings_asgi")
application = get_asgi_application()
