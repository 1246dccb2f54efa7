"""What a report says about the machine: CPUs, services' and libraries' versions, load."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path

from bench import env


def machine_facts() -> dict[str, str]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    facts = {
        "nproc": str(os.cpu_count()),
        "cpu": cpu,
        "python": platform.python_version(),
    }
    try:
        from django.db import connection

        with connection.cursor() as cursor:
            mysql = connection.vendor == "mysql"
            cursor.execute("SELECT VERSION()" if mysql else "SHOW server_version")
            row = cursor.fetchone()
            facts["postgresql"] = (
                (f"(none: MySQL {row[0]})" if mysql else str(row[0])) if row else "?"
            )
    except Exception as exc:  # noqa: BLE001 - a fact we report, not a failure
        facts["postgresql"] = f"? ({exc})"
    try:
        import redis

        facts["redis"] = str(redis.Redis.from_url(env.REDIS_URL).info("server")["redis_version"])
    except Exception as exc:  # noqa: BLE001
        facts["redis"] = f"? ({exc})"
    import django
    import rest_framework

    facts["django"] = django.get_version()
    facts["drf"] = rest_framework.VERSION
    try:
        wrk = subprocess.run(["wrk", "--version"], capture_output=True, text=True)
        facts["wrk"] = (wrk.stdout or wrk.stderr).split("[", 1)[0].strip()
    except OSError:
        facts["wrk"] = "?"
    return facts


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])
