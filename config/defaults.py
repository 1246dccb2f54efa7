"""The development-only defaults of the sample's secrets (refused by ``check --deploy``)."""

from __future__ import annotations

#: ``SECRET_KEY`` when the environment sets none: fine on a laptop, never deployed.
DEV_SECRET_KEY = "dev-only-insecure-secret-key-change-me"
#: ``PAYMENT_GATEWAY_SECRET`` when the environment sets none and ``DEBUG`` is on (it is
#: printed in the README, so anyone can sign callbacks with it). With ``DEBUG`` off the
#: default is empty instead: the callback then trusts nothing.
DEV_GATEWAY_SECRET = "dev-only-gateway-secret-change-me"
