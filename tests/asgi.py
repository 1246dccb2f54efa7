"""The ASGI application of the matrix's real server (``uvicorn tests.asgi:application``)."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.asgi_settings")
application = get_asgi_application()
