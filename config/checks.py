"""Deployment checks of the sample project: ``manage.py check --deploy`` fails on dev secrets.

``sample.E001`` the development ``SECRET_KEY``; ``sample.E002`` ``DEBUG`` on;
``sample.E003`` a missing, short or development ``PAYMENT_GATEWAY_SECRET``. Each is an
error (Django's own deploy checks only warn), so ``check --deploy`` exits non-zero.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, register

from config.defaults import DEV_GATEWAY_SECRET, DEV_SECRET_KEY

#: The shortest gateway secret accepted in a deployment (HMAC-SHA256 keys: 32 bytes).
MIN_GATEWAY_SECRET_LENGTH = 32


@register(Tags.security, deploy=True)
def check_deployment_secrets(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    errors: list[CheckMessage] = []
    if settings.SECRET_KEY == DEV_SECRET_KEY:
        errors.append(
            Error(
                "SECRET_KEY is the sample's development default.",
                hint="Set the SECRET_KEY environment variable to a long random value.",
                id="sample.E001",
            )
        )
    if settings.DEBUG:
        errors.append(
            Error(
                "DEBUG is on.",
                hint="Set DEBUG=0 in the environment of a deployment.",
                id="sample.E002",
            )
        )
    secret = str(getattr(settings, "PAYMENT_GATEWAY_SECRET", "") or "")
    if secret == DEV_GATEWAY_SECRET or len(secret) < MIN_GATEWAY_SECRET_LENGTH:
        errors.append(
            Error(
                "PAYMENT_GATEWAY_SECRET is "
                + (
                    "the development default printed in the README: anyone can forge "
                    "payment callbacks."
                    if secret == DEV_GATEWAY_SECRET
                    else f"missing or shorter than {MIN_GATEWAY_SECRET_LENGTH} characters."
                ),
                hint="Set PAYMENT_GATEWAY_SECRET to the secret you share with the gateway.",
                id="sample.E003",
            )
        )
    return errors
