"""WSGI application of the test project, for tests that run a real server."""

from __future__ import annotations

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.server_settings")
application = get_wsgi_application()
