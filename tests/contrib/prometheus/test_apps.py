"""``idempotency/contrib/prometheus/apps.py``: the app connects the metric receivers once
``METRICS`` is on, at start or whenever the settings change (``override_settings`` too),
and leaves them unconnected while it is off."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.test import override_settings
from prometheus_client import REGISTRY

from idempotency import signals
from idempotency.contrib.prometheus import connect
from tests.support.counting import unique

RECEIVER_UID = "idempotency.contrib.prometheus.replayed"


def replays_counted(route: str) -> float:
    return (
        REGISTRY.get_sample_value(
            "idempotency_outcomes_total", {"outcome": "replayed", "route": route, "store": "-"}
        )
        or 0.0
    )


def replay(route: str) -> None:
    signals.replayed.send(sender=None, scope=unique("scope"), key=unique("key"), route=route)


@pytest.fixture
def unconnected() -> Iterator[None]:
    """The metric receiver of replays disconnected (as before the app turned them on)."""
    signals.replayed.disconnect(dispatch_uid=RECEIVER_UID)
    yield
    connect()


@pytest.mark.usefixtures("unconnected")
def test_turning_metrics_on_connects_the_receivers() -> None:
    route = unique("route")
    with override_settings(IDEMPOTENCY={"METRICS": True}):
        replay(route)
    assert replays_counted(route) == 1


@pytest.mark.usefixtures("unconnected")
def test_while_metrics_are_off_no_receiver_is_connected() -> None:
    route = unique("route")
    with override_settings(IDEMPOTENCY={"METRICS": False}):
        assert not any(uid == RECEIVER_UID for (uid, _), *_ in signals.replayed.receivers)
    with override_settings(IDEMPOTENCY={"METRICS": True}):
        replay(route)
        replay(route)
    assert replays_counted(route) == 2
