"""``idempotency/apps.py``: the app registers its system checks (the deployment ones only
for ``check --deploy``) and connects the outcome logs at start, and again whenever the
settings change."""

from __future__ import annotations

import logging

import pytest
from django.core import checks
from django.core.checks.registry import registry
from django.test import override_settings

from idempotency import apps, signals
from tests.support.counting import unique

LOG_UID = "idempotency.observability.replayed"


def test_the_settings_check_runs_always_and_the_deployment_checks_only_for_deploy() -> None:
    always = registry.get_checks()
    deploying = registry.get_checks(include_deployment_checks=True)
    assert apps.check_settings in always
    for deploy_only in (apps.check_redis_persistence, apps.check_problem_documentation):
        assert deploy_only not in always
        assert deploy_only in deploying


def serious_checks() -> list[checks.CheckMessage]:
    return [m for m in checks.run_checks() if m.id.startswith("idempotency.") and m.is_serious()]


def test_the_registered_check_reports_a_bad_setting() -> None:
    assert serious_checks() == []
    with override_settings(IDEMPOTENCY="not a dict"):
        assert [m.id for m in serious_checks()] == ["idempotency.E001"]


def replays_logged(caplog: pytest.LogCaptureFixture) -> int:
    caplog.clear()
    signals.replayed.send(sender=None, scope=unique("scope"), key=unique("key"), route="r/")
    return sum(getattr(r, "outcome", None) == "replayed" for r in caplog.records)


def test_outcomes_are_logged_from_the_start_and_reconnected_when_the_settings_change(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="idempotency.outcomes")
    assert replays_logged(caplog) == 1
    signals.replayed.disconnect(dispatch_uid=LOG_UID)
    try:
        assert replays_logged(caplog) == 0
        with override_settings(IDEMPOTENCY={"LOG_OUTCOMES": True}):
            assert replays_logged(caplog) == 1
    finally:
        apps.connect_observers()
    assert replays_logged(caplog) == 1
