"""The scheduled ledger reconciliation: finds mismatches, and never runs twice at once."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from decimal import Decimal
from io import StringIO
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.urls import reverse

import accounts.tasks
from accounts.models import Account, ReconciliationRun
from accounts.services import account_deduct, ledger_reconcile
from accounts.tasks import RECONCILE_LOCK, reconcile_ledger
from config.celery import app as celery_app
from idempotency import lock
from tests.support.factories import AccountFactory, UserFactory, funded_account
from tests.support.stores import LOCK_BACKENDS as LOCK_BACKEND_PATHS
from tests.support.stores import locks_using
from tests.support.storms import run_threads


def plant_mismatch(account: Account, balance: str) -> None:
    """Change a balance behind the ledger's back (what reconciliation exists to catch)."""
    Account.objects.filter(pk=account.pk).update(balance=Decimal(balance))


@pytest.mark.django_db
class TestReconcile:
    def test_balanced_books_have_no_mismatch(self) -> None:
        first = funded_account("100.00")
        account_deduct(account_id=first.pk, amount=Decimal("0.10"), reference="a")
        account_deduct(account_id=first.pk, amount=Decimal("0.20"), reference="b")
        funded_account("0.30")
        AccountFactory()  # no ledger at all, balance 0
        result = reconcile_ledger()
        run = ReconciliationRun.objects.get()
        assert result == {
            "status": "done",
            "run_id": run.pk,
            "accounts_checked": 3,
            "mismatches": 0,
        }
        assert (run.accounts_checked, run.mismatches, run.details) == (3, 0, [])
        assert run.started_at <= run.finished_at

    def test_a_planted_mismatch_is_found_recorded_and_logged(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        good = funded_account("50.00")
        bad = funded_account("50.00")
        plant_mismatch(bad, "49.99")
        with caplog.at_level(logging.WARNING, logger="accounts.services"):
            result = reconcile_ledger()
        assert (result["status"], result["accounts_checked"], result["mismatches"]) == (
            "done",
            2,
            1,
        )
        run = ReconciliationRun.objects.get()
        assert run.details == [{"account_id": bad.pk, "balance": "49.99", "ledger_total": "50.00"}]
        assert f"account {bad.pk} holds 49.99 but its ledger sums to 50.00" in caplog.text
        assert f"account {good.pk} " not in caplog.text
        # reconciliation reports; it never corrects a balance
        assert Account.objects.get(pk=bad.pk).balance == Decimal("49.99")

    def test_a_balance_without_any_ledger_is_a_mismatch(self) -> None:
        account = AccountFactory(balance=Decimal("5.00"))
        run = ledger_reconcile()
        assert run.details == [
            {"account_id": account.pk, "balance": "5.00", "ledger_total": "0.00"}
        ]

    def test_the_details_are_bounded_but_every_mismatch_is_counted(self) -> None:
        for _ in range(3):
            plant_mismatch(funded_account("1.00"), "2.00")
        run = ledger_reconcile(details_limit=2)
        assert (run.accounts_checked, run.mismatches, len(run.details)) == (3, 3, 2)

    def test_the_command_runs_the_job_and_prints_a_summary(self) -> None:
        plant_mismatch(funded_account("1.00"), "0.00")
        out = StringIO()
        call_command("reconcile_ledger", stdout=out)
        run = ReconciliationRun.objects.get()
        assert out.getvalue().strip() == (
            f"reconcile_ledger: run {run.pk}: 1 account(s) checked, 1 mismatch(es)"
        )

    def test_the_admin_lists_runs_read_only(self) -> None:
        run = ledger_reconcile()
        admin = Client()
        admin.force_login(UserFactory(username="root", is_staff=True, is_superuser=True))
        assert admin.get(reverse("admin:accounts_reconciliationrun_changelist")).status_code == 200
        change = reverse("admin:accounts_reconciliationrun_change", args=[run.pk])
        assert admin.get(change).status_code == 200
        assert admin.get(reverse("admin:accounts_reconciliationrun_add")).status_code == 403


def test_celery_beat_schedules_the_job() -> None:
    entry = django_settings.CELERY_BEAT_SCHEDULE["reconcile-ledger"]
    assert entry["task"] == reconcile_ledger.name == "accounts.reconcile_ledger"
    assert entry["task"] in celery_app.tasks
    assert float(entry["schedule"]) > 0


def test_the_lock_backend_setting_follows_the_services() -> None:
    locks = django_settings.IDEMPOTENCY.get("LOCKS")
    backend = locks["default"]["BACKEND"] if locks else None
    if os.environ.get("IDEMPOTENCY_LOCK_BACKEND"):
        assert backend == LOCK_BACKEND_PATHS[os.environ["IDEMPOTENCY_LOCK_BACKEND"]]
    elif django_settings.REDIS_URL:
        assert backend == LOCK_BACKEND_PATHS["redis"]
    elif connection.vendor == "postgresql":
        assert backend == LOCK_BACKEND_PATHS["postgres"]
    elif connection.vendor == "mysql":
        assert backend == LOCK_BACKEND_PATHS["mysql"]
    else:
        assert backend is None  # the embedded default: the host-local lock


# -- one run at a time ----------------------------------------------------------------------

LOCK_BACKENDS = [
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    pytest.param("mysql", id="mysql", marks=pytest.mark.mysql),
    pytest.param("redis", id="redis", marks=pytest.mark.redis),
    pytest.param(None, id="embedded-default"),
]


@pytest.fixture(params=LOCK_BACKENDS)
def lock_backend(request: pytest.FixtureRequest, settings: Any) -> str | None:
    """Run the test with each lock backend; ``None``: SQLite without Redis (the file lock)."""
    backend: str | None = request.param
    idempotency = {k: v for k, v in settings.IDEMPOTENCY.items() if k != "LOCKS"}
    if backend is None:
        if connection.vendor != "sqlite":
            pytest.skip("the embedded default's lock is for SQLite")
        settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    else:
        idempotency.update(locks_using(backend))
    settings.IDEMPOTENCY = idempotency
    return backend


def while_running(monkeypatch: pytest.MonkeyPatch, during: Callable[[], Any]) -> list[Any]:
    """Make the next reconciliation call ``during()`` while it holds the lock; its results."""
    seen: list[Any] = []
    real = accounts.tasks.ledger_reconcile

    def reconcile_slowly(**kwargs: Any) -> ReconciliationRun:
        seen.append(during())
        return real(**kwargs)

    monkeypatch.setattr(accounts.tasks, "ledger_reconcile", reconcile_slowly)
    return seen


@pytest.mark.django_db
def test_a_second_run_while_one_runs_is_skipped(
    lock_backend: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    funded_account("10.00")

    def second_scheduler() -> Any:
        # another process's scheduler, as another thread: it must not get the lock
        results: list[Any] = []
        thread = threading.Thread(target=lambda: results.append(reconcile_ledger()))
        thread.start()
        thread.join(timeout=30)
        return results[0]

    seen = while_running(monkeypatch, second_scheduler)
    first = reconcile_ledger()
    assert seen == [{"status": "skipped"}]
    assert first["status"] == "done"
    assert ReconciliationRun.objects.count() == 1
    # the lock was released: the next scheduled run goes ahead
    monkeypatch.undo()
    assert reconcile_ledger()["status"] == "done"


@pytest.mark.django_db
def test_the_job_lock_is_the_named_lock(lock_backend: str | None) -> None:
    if lock_backend is None:
        pytest.skip("the file lock is not the library's lock")
    with lock(RECONCILE_LOCK, timeout=30):  # held by an operator, say
        assert reconcile_ledger() == {"status": "skipped"}
    assert not ReconciliationRun.objects.exists()
    assert reconcile_ledger()["status"] == "done"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "backend",
    [
        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
        pytest.param("mysql", id="mysql", marks=pytest.mark.mysql),
        pytest.param("redis", marks=[pytest.mark.redis, pytest.mark.server_db]),
    ],
)
def test_concurrent_schedulers_run_the_job_once(
    backend: str, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.IDEMPOTENCY = {**settings.IDEMPOTENCY, **locks_using(backend)}
    plant_mismatch(funded_account("10.00"), "9.00")
    real = accounts.tasks.ledger_reconcile
    finished = threading.Semaphore(0)

    def slow(**kwargs: Any) -> ReconciliationRun:
        for _ in range(4):  # the job runs on until every other scheduler was turned away
            assert finished.acquire(timeout=30), "another scheduler is still running"
        return real(**kwargs)

    def scheduler(_index: int) -> Any:
        try:
            return reconcile_ledger()
        finally:
            finished.release()

    monkeypatch.setattr(accounts.tasks, "ledger_reconcile", slow)
    results = run_threads(5, scheduler)
    statuses = sorted(r["status"] if isinstance(r, dict) else repr(r) for r in results)
    assert statuses == ["done", "skipped", "skipped", "skipped", "skipped"]
    run = ReconciliationRun.objects.get()
    assert run.mismatches == 1
