"""``idempotency/signals.py``: one signal per outcome, :data:`OUTCOMES` naming them, and
:func:`heard`, which tells the hot path whether sending a signal reaches anyone who acts on
it (not when its only receiver is the library's log receiver and that log is off)."""

from __future__ import annotations

from typing import Any

import pytest
from django.dispatch import Signal

from idempotency import signals

UID = "tests.signals.log"


def receiver(**kwargs: Any) -> None:
    pass


def other_receiver(**kwargs: Any) -> None:
    pass


@pytest.fixture
def log_receivers(monkeypatch: pytest.MonkeyPatch) -> None:
    """The registry of log receivers as it was, once the test is over."""
    monkeypatch.setattr(signals, "_LOG_RECEIVERS", dict(signals._LOG_RECEIVERS))


def test_every_outcome_names_its_own_signal() -> None:
    assert signals.OUTCOMES["replayed"] is signals.replayed
    assert all(getattr(signals, name) is signal for name, signal in signals.OUTCOMES.items())
    assert len(set(map(id, signals.OUTCOMES.values()))) == len(signals.OUTCOMES)
    # sent for housekeeping, not for a keyed request's outcome
    assert signals.purged not in signals.OUTCOMES.values()
    assert signals.response_cache_failed not in signals.OUTCOMES.values()


def test_a_signal_without_receivers_is_not_heard() -> None:
    assert signals.heard(Signal()) is False


def test_any_receiver_but_the_log_one_is_heard() -> None:
    signal = Signal()
    signal.connect(receiver, weak=False)
    assert signals.heard(signal) is True


@pytest.mark.usefixtures("log_receivers")
def test_the_log_receiver_alone_is_heard_only_while_it_logs() -> None:
    logging_now = [False]
    signal = Signal()
    signal.connect(receiver, dispatch_uid=UID, weak=False)
    signals.log_receiver(signal, UID, lambda: logging_now[0])
    assert signals.heard(signal) is False
    logging_now[0] = True
    assert signals.heard(signal) is True
    logging_now[0] = False
    signal.connect(other_receiver, weak=False)
    assert signals.heard(signal) is True  # another receiver listens


@pytest.mark.usefixtures("log_receivers")
def test_a_lone_receiver_that_is_not_the_log_one_is_heard() -> None:
    signal = Signal()
    signal.connect(receiver, dispatch_uid="someone-else", weak=False)
    signals.log_receiver(signal, UID, lambda: False)
    assert signals.heard(signal) is True
