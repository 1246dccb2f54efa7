"""The sample project under gunicorn, on the private PostgreSQL and Redis.

One :class:`SampleServer` per store variant: its own database in the private cluster,
its own Redis database number, a free port, 4 sync workers. Users, tokens and funded
accounts are created before the load starts.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from chaos.services import ServiceError, free_port

ROOT = Path(__file__).resolve().parent.parent
WORKERS = 4

#: Store variants: environment of the sample (config/settings.py reads these).
VARIANTS: dict[str, dict[str, str]] = {
    "db": {"IDEMPOTENCY_STORE": "idempotency.stores.database.DatabaseStore"},
    "db-cache": {
        "IDEMPOTENCY_STORE": "idempotency.stores.database.DatabaseStore",
        "IDEMPOTENCY_RESPONSE_CACHE": "default",
    },
    "redis": {"IDEMPOTENCY_STORE": "idempotency.stores.redis.RedisStore"},
}

_SETUP_USERS = """
import json, sys
from decimal import Decimal
from django.contrib.auth.models import User
from rest_framework.authtoken.models import Token
from accounts.models import Account, LedgerEntry, LedgerEntryKind
out = []
for i in range({count}):
    user, _ = User.objects.get_or_create(username=f"chaos{{i}}")
    token, _ = Token.objects.get_or_create(user=user)
    account, created = Account.objects.get_or_create(user=user)
    if created:
        account.balance = Decimal("{funds}")
        account.version = 1
        account.save()
        LedgerEntry.objects.create(account=account, amount=account.balance,
            balance_after=account.balance, reference="chaos-funding",
            kind=LedgerEntryKind.DEPOSIT)
    out.append({{"id": user.pk, "token": token.key, "account": account.pk}})
sys.stdout.write("USERS=" + json.dumps(out) + "\\n")
"""


@dataclass
class ChaosUser:
    id: int
    token: str
    account: int

    @property
    def scope(self) -> str:
        """The default scope of this user's records: the user model's label and the pk."""
        return f"auth.user:{self.id}"


@dataclass
class SampleServer:
    variant: str
    database_url: str
    redis_url: str
    log_dir: Path
    lease: float = 4.0
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    users: list[ChaosUser] = field(default_factory=list)

    def env(self) -> dict[str, str]:
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("IDEMPOTENCY_", "DATABASE_", "REDIS_", "CELERY_"))
        }
        env.update(VARIANTS[self.variant])
        env.update(
            DATABASE_URL=self.database_url,
            REDIS_URL=self.redis_url,
            IDEMPOTENCY_LEASE=str(self.lease),
            DJANGO_SETTINGS_MODULE="config.settings",
            DEBUG="0",
            ALLOWED_HOSTS="127.0.0.1,localhost",
            PYTHONUNBUFFERED="1",
            LOG_LEVEL="WARNING",  # the library's outage reports show in the gunicorn log
        )
        return env

    def manage(self, *args: str, timeout: float = 180) -> str:
        done = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if done.returncode:
            raise ServiceError(f"manage.py {' '.join(args)} failed:\n{done.stderr[-3000:]}")
        return done.stdout

    def prepare(self, users: int, funds: str = "900000.00") -> None:
        self.manage("migrate", "--noinput", "-v", "0")
        out = self.manage("shell", "-c", _SETUP_USERS.format(count=users, funds=funds))
        line = next(x for x in out.splitlines() if x.startswith("USERS="))
        self.users = [ChaosUser(**u) for u in json.loads(line[len("USERS=") :])]

    @property
    def log(self) -> Path:
        return self.log_dir / f"gunicorn-{self.variant}.log"

    def start(self, timeout: float = 60.0) -> None:
        command = [
            sys.executable, "-m", "gunicorn", "config.wsgi:application",
            "--workers", str(WORKERS), "--worker-class", "sync", "--timeout", "30",
            "--bind", f"127.0.0.1:{self.port}", "--graceful-timeout", "3",
            "--log-level", "warning",
        ]  # fmt: skip
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                command,
                cwd=ROOT,
                env=self.env(),
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ServiceError(f"gunicorn exited:\n{self.log_tail()}")
            if len(self.worker_pids()) == WORKERS and self._answers():
                return
            time.sleep(0.2)
        raise ServiceError(f"gunicorn not ready:\n{self.log_tail()}")

    def _answers(self) -> bool:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
            conn.request("GET", "/api/accounts/me/")
            status = conn.getresponse().status
            conn.close()
            return status in (401, 403)
        except OSError:
            return False

    def worker_pids(self) -> list[int]:
        if self.process is None:
            return []
        pid = self.process.pid
        try:
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            return []
        return [int(child) for child in children]

    def workers_rss_mib(self) -> float:
        total = 0
        for pid in self.worker_pids():
            try:
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
            except OSError:
                continue
        return total / 1024

    def kill_a_worker(self) -> bool:
        pids = self.worker_pids()
        if not pids:
            return False
        try:
            os.kill(pids[int(time.monotonic() * 1000) % len(pids)], signal.SIGKILL)
        except ProcessLookupError:
            return False
        return True

    def log_count(self, text: str) -> int:
        """How many lines of the gunicorn log (the workers' stderr) contain ``text``."""
        if not self.log.exists():
            return 0
        return sum(text in line for line in self.log.read_text(errors="replace").splitlines())

    def log_tail(self, lines: int = 30) -> str:
        if not self.log.exists():
            return ""
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=5)
