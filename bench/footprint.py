"""What one keyed DRF POST on ``DatabaseStore`` loads of the package:
``python -m bench.footprint`` prints the ``idempotency`` modules (migrations aside) in
``sys.modules`` after ``django.setup()`` and two requests with one key (the first runs the
view, the second is replayed), their lines, and the package's own size, as JSON.

The database is migrated by a process of its own first, as a deployment migrates before its
servers start: what ``migrate`` loads (the management package, ...) is no request's.

The figure a reader faces: every module loaded is one a reader of that request may have
to open. ``--module`` lists the modules too.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

PACKAGE = Path(__file__).resolve().parent.parent / "idempotency"

urlpatterns: list[Any] = []


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def package_size() -> tuple[int, int]:
    """Modules and lines of ``idempotency/``, migrations aside."""
    files = [p for p in PACKAGE.rglob("*.py") if "migrations" not in p.parts]
    return len(files), sum(_lines(p) for p in files)


def configure(database: str) -> None:
    import django
    from django.conf import settings

    settings.configure(
        DEBUG=False,
        SECRET_KEY="footprint",
        ALLOWED_HOSTS=["testserver"],
        ROOT_URLCONF=__name__,
        INSTALLED_APPS=[
            "django.contrib.contenttypes",
            "django.contrib.auth",
            "rest_framework",
            "idempotency",
            "idempotency.contrib.drf",
        ],
        MIDDLEWARE=[],
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": database}},
        USE_TZ=True,
    )
    django.setup()


def migrate(database: str) -> None:
    configure(database)
    from django.core.management import call_command

    call_command("migrate", verbosity=0, skip_checks=True)


def keyed_drf_post(database: str) -> dict[str, Any]:
    configure(database)
    from django.contrib.auth.models import User
    from django.urls import path
    from rest_framework.decorators import api_view
    from rest_framework.response import Response
    from rest_framework.test import APIClient

    from idempotency import idempotent

    @api_view(["POST"])
    @idempotent(required=True)
    def pay(request: Any) -> Response:
        return Response({"amount": request.data["amount"]}, status=201)

    urlpatterns[:] = [path("pay", pay)]
    client = APIClient()
    client.force_authenticate(User.objects.create(username="alice"))
    statuses = [
        client.post("/pay", {"amount": 5}, format="json", HTTP_IDEMPOTENCY_KEY="k-1").status_code
        for _ in range(2)
    ]
    loaded = sorted(
        name
        for name, module in sys.modules.items()
        if (name == "idempotency" or name.startswith("idempotency."))
        and ".migrations" not in name
        and getattr(module, "__file__", None)
    )
    return {
        "statuses": statuses,
        "modules": loaded,
        "lines": sum(_lines(Path(sys.modules[name].__file__ or "")) for name in loaded),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modules", action="store_true", help="list the modules loaded")
    parser.add_argument("--migrate", metavar="DATABASE", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.migrate:
        migrate(args.migrate)
        return 0
    with tempfile.TemporaryDirectory() as directory:
        database = str(Path(directory) / "footprint.sqlite3")
        subprocess.run([sys.executable, "-m", "bench.footprint", "--migrate", database], check=True)
        found = keyed_drf_post(database)
    modules, lines = package_size()
    report = {
        "request_statuses": found["statuses"],
        "request_modules": len(found["modules"]),
        "request_lines": found["lines"],
        "package_modules": modules,
        "package_lines": lines,
    }
    if args.modules:
        report["loaded"] = found["modules"]
    print(json.dumps(report, indent=2))
    return 0 if found["statuses"] == [201, 201] else 1


if __name__ == "__main__":
    sys.exit(main())
