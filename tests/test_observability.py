"""Structured logs (one record per non-trivial outcome, with fields and without content)
and the engine's tracing hook."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from decimal import Decimal
from types import SimpleNamespace
from typing import Any

import pytest
from django.test import override_settings
from rest_framework.test import APIClient

from idempotency import observability, signals
from idempotency.contrib import prometheus as metrics
from idempotency.observability import JsonFormatter, key_hash
from idempotency.scopes import user_scope
from idempotency.stores.database import DatabaseStore
from tests.support.factories import OrderFactory, UserFactory, funded_account
from tests.support.stores import STORE_VARIANTS, variant_params

pytestmark = pytest.mark.django_db

LOGGER = "idempotency.outcomes"
FIELDS = {"outcome", "scope_hash", "key_hash", "route", "store", "claim_seconds"}
SECRET = "body-secret-4711"  # in every request body; must never reach a log record
KEY = "log-key-0815"


@pytest.fixture
def client() -> APIClient:
    user = UserFactory()
    client = APIClient(raise_request_exception=False)
    client.force_authenticate(user=user)
    client.user = user  # type: ignore[attr-defined]
    return client


def create(client: APIClient, amount: str = "5.00", key: str = KEY) -> Any:
    return client.post(
        "/api/orders/",
        {"request_id": SECRET, "amount": amount},
        format="json",
        HTTP_IDEMPOTENCY_KEY=key,
    )


def outcome_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == LOGGER]


def assert_no_content(record: logging.LogRecord) -> None:
    text = json.dumps({k: str(v) for k, v in record.__dict__.items()}) + record.getMessage()
    assert SECRET not in text  # no request body, and the response body echoes it
    assert KEY not in text  # no raw key
    assert "amount" not in text


def test_replay_and_mismatch_each_log_one_record(
    client: APIClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    assert create(client).status_code == 201
    assert outcome_records(caplog) == []  # a first request is routine: no record
    replay = create(client)
    assert replay["Idempotent-Replayed"] == "true"
    assert SECRET.encode() in replay.content  # the body does hold the secret
    assert create(client, amount="6.00").status_code == 422

    replayed, mismatch = outcome_records(caplog)
    for record, outcome, level in [
        (replayed, "replayed", logging.INFO),
        (mismatch, "mismatch", logging.WARNING),
    ]:
        fields = {name: getattr(record, name) for name in FIELDS}
        assert fields["outcome"] == outcome
        assert record.levelno == level
        scope = user_scope(SimpleNamespace(user=client.user))  # type: ignore[attr-defined,arg-type]
        assert fields["scope_hash"] == key_hash(str(scope))
        assert fields["key_hash"] == key_hash(KEY)
        assert KEY not in record.getMessage() and str(scope) not in record.getMessage()
        assert fields["route"] == "api/orders/"
        assert fields["store"] == "DatabaseStore"
        assert isinstance(fields["claim_seconds"], float) and fields["claim_seconds"] >= 0
        assert_no_content(record)


def test_a_release_logs_the_error_class_only(
    client: APIClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    funded_account("1.00", user=client.user)  # type: ignore[attr-defined]
    order = OrderFactory(user=client.user, amount=Decimal("50.00"))  # type: ignore[attr-defined]
    response = client.post(
        f"/api/orders/{order.pk}/pay/",
        {"pay_no": SECRET},
        format="json",
        HTTP_IDEMPOTENCY_KEY=KEY,
    )
    assert response.status_code == 409  # insufficient funds: transient, released
    (record,) = outcome_records(caplog)
    assert record.outcome == "released"  # type: ignore[attr-defined]
    # the view raised; its class is logged, never its message
    assert record.error == "InsufficientFundsError"  # type: ignore[attr-defined]
    assert record.route == "api/orders/<order_id:pk>/pay/"  # type: ignore[attr-defined]
    assert_no_content(record)


def test_stale_owners_and_unreachable_stores_are_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    signals.stale_owner.send(
        sender=DatabaseStore, request=None, scope="fn:settle", key=KEY, fence=3
    )
    signals.store_unavailable.send(
        sender=None, store="RedisStore", exception=ConnectionError(f"down {SECRET}")
    )
    stale, unavailable = outcome_records(caplog)
    assert (stale.outcome, stale.levelno, stale.key_hash) == (  # type: ignore[attr-defined]
        "stale_owner",
        logging.WARNING,
        key_hash(KEY),
    )
    assert unavailable.store == "RedisStore"  # type: ignore[attr-defined]
    assert unavailable.error == "ConnectionError"  # type: ignore[attr-defined]
    assert unavailable.levelno == logging.ERROR
    for record in (stale, unavailable):
        assert_no_content(record)


def test_the_setting_turns_the_records_off(
    client: APIClient, caplog: pytest.LogCaptureFixture, settings: Any
) -> None:
    settings.IDEMPOTENCY = {**settings.IDEMPOTENCY, "LOG_OUTCOMES": False}
    caplog.set_level(logging.INFO, logger=LOGGER)
    create(client)
    assert create(client)["Idempotent-Replayed"] == "true"
    assert outcome_records(caplog) == []


def test_a_replay_dispatches_nothing_while_its_record_is_off_and_nobody_listens(
    client: APIClient, caplog: pytest.LogCaptureFixture, settings: Any
) -> None:
    dispatched: list[str] = []
    send = signals.replayed.send

    def counted(*args: Any, **kwargs: Any) -> Any:
        dispatched.append(kwargs["key"])
        return send(*args, **kwargs)

    heard: list[str] = []

    def listener(sender: Any, **kwargs: Any) -> None:
        heard.append(kwargs["key"])

    signals.replayed.send = counted  # type: ignore[method-assign]
    # the sample's metrics listen to every outcome: leave the log receiver alone
    signals.replayed.disconnect(dispatch_uid="idempotency.contrib.prometheus.replayed")
    signals.replayed.has_listeners()  # drops receivers that earlier tests' garbage left
    try:
        caplog.set_level(logging.WARNING, logger=LOGGER)  # replays log at INFO: off
        create(client, key="quiet-1")
        assert create(client, key="quiet-1")["Idempotent-Replayed"] == "true"
        assert dispatched == []  # the log receiver alone, its level off: not sent at all

        signals.replayed.connect(listener)  # someone listens: sent, and they hear it
        try:
            assert create(client, key="quiet-1")["Idempotent-Replayed"] == "true"
        finally:
            signals.replayed.disconnect(listener)
        assert dispatched == heard == ["quiet-1"]

        caplog.set_level(logging.INFO, logger=LOGGER)  # the record on again: sent, logged
        assert create(client, key="quiet-1")["Idempotent-Replayed"] == "true"
        assert dispatched == ["quiet-1", "quiet-1"]
        assert [r.outcome for r in outcome_records(caplog)] == ["replayed"]  # type: ignore[attr-defined]

        # off by the setting (metrics off too: a settings change connects them again)
        settings.IDEMPOTENCY = {**settings.IDEMPOTENCY, "LOG_OUTCOMES": False, "METRICS": False}
        assert create(client, key="quiet-1")["Idempotent-Replayed"] == "true"
        assert dispatched == ["quiet-1", "quiet-1"]  # off by the setting: not sent either
    finally:
        del signals.replayed.send
        metrics.connect()


def test_json_formatter_renders_the_fields(
    client: APIClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    create(client)
    create(client)
    (record,) = outcome_records(caplog)
    line = JsonFormatter().format(record)
    data = json.loads(line)
    assert data["level"] == "INFO" and data["logger"] == LOGGER
    assert data["message"].startswith("idempotency replayed")
    assert set(data) >= FIELDS
    assert data["key_hash"] == key_hash(KEY)
    assert SECRET not in line and KEY not in line


@pytest.mark.django_db(transaction=True)
@pytest.mark.urls("tests.urls")
@pytest.mark.parametrize("variant", variant_params("db-lease", "redis", "cache"))
def test_a_stale_owner_is_logged_by_its_hashes_never_its_scope_or_key(
    variant: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 43, finding 5: StaleOwner put the raw scope and key into its message, which
    Django's error log (``django.request``) prints with the traceback."""
    from django.test import Client, override_settings

    from idempotency.exceptions import StaleOwner
    from idempotency.utils.hashing import log_ref

    user = UserFactory()
    client = Client(raise_request_exception=False)
    client.force_login(user)
    key = "stale-owner-key-4711"
    scope = user_scope(SimpleNamespace(user=user))  # type: ignore[arg-type]
    assert scope is not None
    with override_settings(IDEMPOTENCY=STORE_VARIANTS[variant]), caplog.at_level(logging.ERROR):
        answer = client.post("/t/stale-owner/", HTTP_IDEMPOTENCY_KEY=key)
    assert answer.status_code == 500
    errors = [r for r in caplog.records if r.exc_info and isinstance(r.exc_info[1], StaleOwner)]
    assert errors, [r.getMessage() for r in caplog.records]
    for record in errors:
        text = record.getMessage() + "\n" + logging.Formatter().formatException(record.exc_info)  # type: ignore[arg-type]
        assert key not in text and scope not in text
        assert log_ref(scope, key) in text


# -- the tracing hook -------------------------------------------------------------------


@pytest.fixture
def tracer() -> Iterator[list[tuple[str, str, Any]]]:
    """A tracer registered with the hook for one test (the registered one put back after):
    it notes each step's name, operation and recorded result."""
    seen: list[tuple[str, str, Any]] = []

    @contextmanager
    def spans(name: str, owner: Any, operation: str) -> Iterator[Callable[[Any], Any]]:
        def done(result: Any) -> Any:
            seen.append((name, operation, result))
            return result

        yield done

    before = list(observability._spans)
    observability.register(spans)
    yield seen
    observability._spans[:] = before


def test_a_step_runs_in_the_registered_tracers_span_while_tracing_is_on(
    tracer: list[tuple[str, str, Any]],
) -> None:
    owner = SimpleNamespace(store=None, key="k", mode="lease", scope_kind="shared")
    with (
        override_settings(IDEMPOTENCY={"OPENTELEMETRY": True}),
        observability.spanned("claim", owner, "peek") as done,
    ):
        assert done("answer") == "answer"
    assert tracer == [("claim", "peek", "answer")]


def test_a_step_runs_plainly_while_tracing_is_off(tracer: list[tuple[str, str, Any]]) -> None:
    owner = SimpleNamespace(store=None, key="k", mode="lease", scope_kind="shared")
    with (
        override_settings(IDEMPOTENCY={"OPENTELEMETRY": False}),
        observability.spanned("claim", owner, "peek") as done,
    ):
        assert done("answer") == "answer"
    assert tracer == []


def test_the_last_tracer_registered_wins(tracer: list[tuple[str, str, Any]]) -> None:
    other: list[str] = []

    @contextmanager
    def spans(name: str, owner: Any, operation: str) -> Iterator[Callable[[Any], Any]]:
        other.append(name)
        yield lambda result: result

    observability.register(spans)
    with (
        override_settings(IDEMPOTENCY={"OPENTELEMETRY": True}),
        observability.spanned("complete", SimpleNamespace(), "complete") as done,
    ):
        done(True)
    assert (other, tracer) == (["complete"], [])
