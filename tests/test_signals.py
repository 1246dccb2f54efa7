"""The outcome signals, and :func:`~idempotency.signals.heard`: the hot path builds a
signal's arguments only where a receiver acts on them."""

from __future__ import annotations

from typing import Any

from django.dispatch import Signal

from idempotency import signals


def test_every_outcome_names_its_own_signal() -> None:
    assert signals.OUTCOMES["replayed"] is signals.replayed
    assert len(set(map(id, signals.OUTCOMES.values()))) == len(signals.OUTCOMES)


def test_a_signal_without_receivers_is_not_heard() -> None:
    assert not signals.heard(Signal())


def test_a_signal_whose_only_receiver_is_the_log_receiver_is_heard_while_it_logs() -> None:
    signal = Signal()

    def receive(sender: Any, **kwargs: Any) -> None: ...

    signal.connect(receive, dispatch_uid="logs", weak=False)
    logging_now = [True]
    signals.log_receiver(signal, "logs", lambda: logging_now[0])
    assert signals.heard(signal)
    logging_now[0] = False
    assert not signals.heard(signal)
    signal.connect(lambda sender, **kwargs: None, dispatch_uid="another", weak=False)
    assert signals.heard(signal)  # another receiver acts on it
