"""OpenTelemetry: the spans of keyed requests and calls, and the metrics of their outcomes.

Real requests through Django's test client, traced by ``opentelemetry-instrumentation-django``
(the request span) and the SDK with its in-memory exporters: the spans' names, their
parent, their attributes (never a key, a scope or a body: every attribute of every span is
scanned), and the counter and histogram beside the Prometheus ones. On SQLite, and on
PostgreSQL and Redis where ``DATABASE_URL`` and ``REDIS_URL`` name them.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from django.test import Client, override_settings
from opentelemetry import metrics, trace
from opentelemetry.instrumentation.django import DjangoInstrumentor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from idempotency import idempotent_function
from idempotency.observability import key_hash
from tests.support.factories import OrderFactory, UserFactory, funded_account
from tests.support.faults import dead_redis_store
from tests.support.http import new_key, post
from tests.support.services import ROOT
from tests.support.stores import DB_STORE, STORE_VARIANTS, backend_of, using, variant_params
from tests.support.traces import render

pytestmark = [pytest.mark.urls("tests.urls"), pytest.mark.django_db(transaction=True)]

URL = "/t/outcome/"
#: What the request bodies carry, which no attribute may
SECRET = "card-4242-4242-SECRET"

EXPORTER = InMemorySpanExporter()
READER = InMemoryMetricReader()
TRACER_PROVIDER = TracerProvider()
TRACER_PROVIDER.add_span_processor(SimpleSpanProcessor(EXPORTER))
METER_PROVIDER = MeterProvider(metric_readers=[READER])


@pytest.fixture(scope="module", autouse=True)
def providers() -> None:
    """The SDK as the process's providers (OpenTelemetry sets them once per process)."""
    trace.set_tracer_provider(TRACER_PROVIDER)
    metrics.set_meter_provider(METER_PROVIDER)
    assert trace.get_tracer_provider() is TRACER_PROVIDER
    assert metrics.get_meter_provider() is METER_PROVIDER


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """The spans of this test; the request span by the Django instrumentation."""
    EXPORTER.clear()
    instrumentor = DjangoInstrumentor()
    instrumentor.instrument(tracer_provider=TRACER_PROVIDER, meter_provider=METER_PROVIDER)
    try:
        yield EXPORTER
    finally:
        instrumentor.uninstrument()
        EXPORTER.clear()


@pytest.fixture(params=variant_params("db-atomic", "db-lease", "redis"))
def variant(request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    chosen = {**STORE_VARIANTS[request.param], "OPENTELEMETRY": True}
    with override_settings(IDEMPOTENCY=chosen):
        yield chosen


def ours(exported: InMemorySpanExporter) -> list[ReadableSpan]:
    return [span for span in exported.get_finished_spans() if span.name.startswith("idempotency.")]


def request_span(exported: InMemorySpanExporter) -> ReadableSpan:
    (server,) = [span for span in exported.get_finished_spans() if span.kind is SpanKind.SERVER]
    return server


def summary(found: list[ReadableSpan]) -> list[tuple[str, str]]:
    return [(span.name, str((span.attributes or {})["idempotency.outcome"])) for span in found]


def assert_children_of_the_request(exported: InMemorySpanExporter) -> None:
    parent = request_span(exported).context
    for span in ours(exported):
        assert span.parent is not None and span.parent.span_id == parent.span_id, span.name
        assert span.context.trace_id == parent.trace_id


def assert_nothing_secret(exported: InMemorySpanExporter, *secrets: str) -> None:
    """No attribute of any span (the request's included) holds a key, a scope or a body."""
    values = [
        str(value)
        for span in exported.get_finished_spans()
        for value in (span.attributes or {}).values()
    ]
    assert values
    for secret in secrets:
        assert not [value for value in values if secret in value], secret


def outcome_points() -> dict[tuple[str, str], float]:
    """The counter's value by (outcome, store), the histogram's count as ("claim", store)."""
    points: dict[tuple[str, str], float] = {}
    data = READER.get_metrics_data()
    for resource in data.resource_metrics if data else []:
        for scope in resource.scope_metrics:
            if scope.scope.name != "idempotency":
                continue
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    labels = dict(point.attributes or {})
                    if metric.name == "idempotency.outcomes":
                        key = (str(labels["idempotency.outcome"]), str(labels["idempotency.store"]))
                        points[key] = points.get(key, 0) + point.value  # type: ignore[union-attr]
                    elif metric.name == "idempotency.claim.duration":
                        key = ("claim", str(labels["idempotency.store"]))
                        points[key] = points.get(key, 0) + point.count  # type: ignore[union-attr]
                        assert point.sum >= 0  # type: ignore[union-attr]
    return points


def delta(before: dict[tuple[str, str], float], after: dict[tuple[str, str], float]) -> dict:
    return {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}


def test_a_first_request_its_replay_and_a_release(
    variant: dict[str, Any], spans: InMemorySpanExporter, client_a: Client, wallet: Any
) -> None:
    store = backend_of(variant).rpartition(".")[2]
    scope = f"user:{client_a.session['_auth_user_id']}"
    key, released = new_key(), new_key()
    before = outcome_points()
    body = {"amount": 5, "label": SECRET}

    first = post(client_a, URL, body, key)
    assert first.status_code == 201
    found = ours(spans)
    looks = ["absent"] if backend_of(variant) == DB_STORE else []  # the database looks first
    assert summary(found) == [
        *[("idempotency.claim", look) for look in looks],
        ("idempotency.claim", "claimed"),
        ("idempotency.complete", "stored"),
    ]
    assert_children_of_the_request(spans)
    for span in found:
        assert span.attributes is not None
        assert span.attributes["idempotency.store"] == store
        assert span.attributes["idempotency.mode"] == variant["MODE"]
        assert span.attributes["idempotency.scope.kind"] == "auth.user"
        assert span.attributes["idempotency.interface"] == "http"
        assert span.attributes["idempotency.key.hash"] == key_hash(key)
        assert span.status.status_code is StatusCode.UNSET
    operations = [span.attributes.get("idempotency.operation") for span in found]  # type: ignore[union-attr]
    assert operations[-2] == "claim" and operations[-1] is None
    assert_nothing_secret(spans, key, scope, SECRET)

    spans.clear()
    again = post(client_a, URL, body, key)
    assert again.status_code == 201 and again["Idempotent-Replayed"] == "true"
    assert summary(ours(spans)) == [
        ("idempotency.claim", "completed"),
        ("idempotency.replay", "replayed"),
    ]
    assert_children_of_the_request(spans)
    assert_nothing_secret(spans, key, scope, SECRET)

    spans.clear()
    failed = post(client_a, f"{URL}?status=503", body, released)
    assert failed.status_code == 503
    assert summary(ours(spans))[-1] == ("idempotency.release", "released")
    assert_children_of_the_request(spans)
    assert_nothing_secret(spans, released, scope, SECRET)

    counted = delta(before, outcome_points())
    assert counted == {
        ("stored", store): 1,
        ("replayed", store): 1,
        ("released", store): 1,
        ("claim", store): 3,  # one claim latency per request
    }


def test_an_async_view_traces_under_its_request(
    spans: InMemorySpanExporter, client_a: Client, wallet: Any
) -> None:
    """An async view's steps run in threads (``sync_to_async``), in the request's context."""
    key = new_key()
    with override_settings(IDEMPOTENCY={**using(DB_STORE), "OPENTELEMETRY": True}):
        assert post(client_a, "/t/async/", {"amount": 5, "label": SECRET}, key).status_code == 201
    assert summary(ours(spans)) == [
        ("idempotency.claim", "absent"),
        ("idempotency.claim", "claimed"),
        ("idempotency.complete", "stored"),
    ]
    assert {span.attributes["idempotency.mode"] for span in ours(spans)} == {"lease"}  # type: ignore[index]
    assert_children_of_the_request(spans)
    assert_nothing_secret(spans, key, SECRET)


def test_a_mismatch(
    variant: dict[str, Any], spans: InMemorySpanExporter, client_a: Client, wallet: Any
) -> None:
    key = new_key()
    assert post(client_a, URL, {"amount": 5}, key).status_code == 201
    spans.clear()
    assert post(client_a, URL, {"amount": 6, "label": SECRET}, key).status_code == 422
    assert summary(ours(spans)) == [("idempotency.claim", "mismatch")]
    assert_children_of_the_request(spans)
    assert_nothing_secret(spans, key, SECRET)


def test_a_store_outage_is_an_error_span(spans: InMemorySpanExporter, client_a: Client) -> None:
    key = new_key()
    with dead_redis_store(OPENTELEMETRY=True):
        assert post(client_a, URL, {"amount": 5}, key).status_code == 503
    (claim,) = ours(spans)
    assert claim.name == "idempotency.claim" and claim.status.status_code is StatusCode.ERROR
    assert claim.attributes is not None
    assert claim.attributes["idempotency.outcome"] == "store_unavailable"
    assert claim.attributes["error.type"] == "StoreUnavailable"
    assert claim.status.description is None and not claim.events  # no message, no traceback
    assert_nothing_secret(spans, key)


@pytest.mark.parametrize("mode", ["lease", "atomic"])
def test_a_function_traces_the_same_steps(mode: str, spans: InMemorySpanExporter) -> None:
    runs: list[str] = []

    @idempotent_function(key=lambda order: f"charge-{order}", mode=mode)
    def charge(order: str) -> dict[str, str]:
        runs.append(order)
        return {"charged": order}

    tracer = trace.get_tracer("tests")
    traced = override_settings(IDEMPOTENCY={**using(DB_STORE), "OPENTELEMETRY": True})
    with traced, tracer.start_as_current_span("job") as job:
        assert charge(SECRET) == {"charged": SECRET}
        assert charge(SECRET) == {"charged": SECRET}
    assert runs == [SECRET]
    found = ours(spans)
    assert summary(found) == [
        ("idempotency.claim", "absent"),
        ("idempotency.claim", "claimed"),
        ("idempotency.complete", "stored"),
        ("idempotency.claim", "completed"),
        ("idempotency.replay", "replayed"),
    ]
    for span in found:
        assert span.parent is not None and span.parent.span_id == job.get_span_context().span_id
        assert span.attributes is not None
        assert span.attributes["idempotency.interface"] == "function"
        assert span.attributes["idempotency.scope.kind"] == "shared"
        assert span.attributes["idempotency.mode"] == mode
    assert_nothing_secret(spans, f"charge-{SECRET}", SECRET)


def test_off_by_default_nothing_is_traced(
    spans: InMemorySpanExporter, client_a: Client, wallet: Any
) -> None:
    with override_settings(IDEMPOTENCY={**using(DB_STORE)}):
        assert post(client_a, URL, {"amount": 5}, new_key()).status_code == 201
    assert request_span(spans) and ours(spans) == []


def test_without_the_app_opentelemetry_is_never_imported() -> None:
    """A keyed request in a project without ``idempotency.contrib.otel`` in its
    INSTALLED_APPS imports neither the API nor the integration: the engine's tracing hook
    is the core's own."""
    code = """
import sys, django
from django.conf import settings
settings.INSTALLED_APPS = [a for a in settings.INSTALLED_APPS if a != "idempotency.contrib.otel"]
django.setup()
settings.ROOT_URLCONF = "tests.urls"
settings.ALLOWED_HOSTS = ["testserver"]
from django.core.management import call_command
call_command("migrate", run_syncdb=True, verbosity=0)
from django.contrib.auth.models import User
from django.test import Client
client = Client()
client.force_login(User.objects.create_user("carol"))
response = client.post(
    "/t/outcome/", data="{}", content_type="application/json", HTTP_IDEMPOTENCY_KEY="k-1"
)
assert response.status_code == 201, response.status_code
otel = ("opentelemetry", "idempotency.contrib.otel")
loaded = sorted(m for m in sys.modules if m.startswith(otel))
assert not loaded, loaded
"""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "DATABASE_URL": f"sqlite:///{ROOT / '.otel-off.sqlite3'}",
    }
    try:
        done = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True
        )
    finally:
        (ROOT / ".otel-off.sqlite3").unlink(missing_ok=True)
    assert done.returncode == 0, done.stderr[-3000:]


BEGIN, END = "<!-- trace: begin -->\n```text\n", "```\n<!-- trace: end -->"


@pytest.mark.urls("config.urls")
def test_the_trace_on_the_docs_page_is_what_a_run_exports(spans: InMemorySpanExporter) -> None:
    """docs/howto/opentelemetry.md shows the trace of a payment and its repeat, rendered
    from this run (``IDEMPOTENCY_UPDATE_TRACE=1`` writes it into the page)."""
    user = UserFactory(username="alice")
    funded_account("100.00", user=user)
    order = OrderFactory(user=user, amount=Decimal("10.00"))
    client = Client()
    client.force_login(user)
    with override_settings(IDEMPOTENCY={"OPENTELEMETRY": True}):
        for _ in range(2):
            paid = post(client, f"/api/orders/{order.pk}/pay/", {"pay_no": "PAY-1"}, "pay-order-1")
            assert paid.status_code == 201
    text = render(spans.get_finished_spans())
    page_path = ROOT / "docs" / "howto" / "opentelemetry.md"
    page = page_path.read_text()
    head, _, rest = page.partition(BEGIN)
    _, _, tail = rest.partition(END)
    if os.environ.get("IDEMPOTENCY_UPDATE_TRACE") == "1":
        page_path.write_text(f"{head}{BEGIN}{text}{END}{tail}")
        page = page_path.read_text()
    # a key's hash names its scope too (auth.user:<pk>), and primary keys depend on what
    # ran before: the page matches the run but for the hashes' digits
    assert _unhashed(f"{BEGIN}{text}{END}") in _unhashed(page)
    assert "pay-order-1" not in text and f"user:{user.pk}" not in text


def _unhashed(text: str) -> str:
    """``text`` with each key hash's digits left out."""
    return re.sub(r"(idempotency\.key\.hash = )[0-9a-f]{16}", r"\1<hash>", text)
