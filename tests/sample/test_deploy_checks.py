"""``manage.py check --deploy`` refuses the sample's development secrets and DEBUG."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from config.checks import check_deployment_secrets
from config.defaults import DEV_GATEWAY_SECRET, DEV_SECRET_KEY

ROOT = Path(__file__).resolve().parents[2]
GOOD = {
    "SECRET_KEY": "k" * 60,
    "DEBUG": False,
    "PAYMENT_GATEWAY_SECRET": "g" * 40,
}


def ids(**changes: object) -> set[str]:
    with override_settings(**{**GOOD, **changes}):
        return {message.id for message in check_deployment_secrets()}  # type: ignore[misc]


def test_a_configured_deployment_passes() -> None:
    assert ids() == set()


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"SECRET_KEY": DEV_SECRET_KEY}, "sample.E001"),
        ({"DEBUG": True}, "sample.E002"),
        ({"PAYMENT_GATEWAY_SECRET": DEV_GATEWAY_SECRET}, "sample.E003"),
        ({"PAYMENT_GATEWAY_SECRET": ""}, "sample.E003"),
        ({"PAYMENT_GATEWAY_SECRET": "short"}, "sample.E003"),
    ],
)
def test_each_development_default_is_an_error(changes: dict[str, object], expected: str) -> None:
    assert ids(**changes) == {expected}


def test_call_command_check_deploy_fails_on_them() -> None:
    with (
        override_settings(**{**GOOD, "PAYMENT_GATEWAY_SECRET": DEV_GATEWAY_SECRET}),
        pytest.raises(SystemCheckError, match="sample.E003"),
    ):
        call_command("check", deploy=True)


def _manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    environ = {
        k: v
        for k, v in os.environ.items()
        if k not in {"SECRET_KEY", "DEBUG", "PAYMENT_GATEWAY_SECRET", "DJANGO_SETTINGS_MODULE"}
    }
    environ.update(env, DATABASE_URL="sqlite:///:memory:")
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=environ, capture_output=True, text=True
    )


def test_a_fresh_checkout_fails_check_deploy_and_a_configured_one_passes() -> None:
    fresh = _manage({}, "check", "--deploy")
    assert fresh.returncode != 0
    for check_id in ("sample.E001", "sample.E002", "sample.E003"):
        assert check_id in fresh.stderr
    configured = _manage(
        {"SECRET_KEY": "s" * 60, "DEBUG": "0", "PAYMENT_GATEWAY_SECRET": "g" * 40},
        "check",
        "--deploy",
        "--fail-level",
        "ERROR",
    )
    assert configured.returncode == 0, configured.stderr
    assert "sample.E" not in configured.stderr


def test_without_debug_the_gateway_secret_has_no_fallback() -> None:
    probe = _manage(
        {"DEBUG": "0"},
        "shell",
        "-c",
        "from django.conf import settings; print(repr(settings.PAYMENT_GATEWAY_SECRET))",
    )
    assert probe.stdout.strip().splitlines()[-1] == "''", probe.stderr
