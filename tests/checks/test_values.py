"""Each value against its description (idempotency.checks.values): E002, E004, E005, E010,
E011, E014, E016, E018, E043, E044-E046; and check --deploy's W041."""

from __future__ import annotations

import importlib.util
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from idempotency.checks import check_problem_documentation, check_settings
from tests.support.checks import ids, one_database, only, two_databases


def test_e002_unknown_key_suggests_the_close_one() -> None:
    with override_settings(IDEMPOTENCY={"TLL": 60}, DATABASES=one_database()):
        (message,) = check_settings()
    assert message.id == "idempotency.E002"
    assert "'TLL'" in message.msg
    assert "Did you mean 'TTL'?" in (message.hint or "")


def test_e014_mode() -> None:
    only("E014", IDEMPOTENCY={"MODE": "fast"})


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("TTL", 0),
        ("TTL", -1),
        ("TTL", "86400"),
        ("TTL", float("inf")),
        ("LEASE", None),
        ("WAIT", -0.5),
        ("LOCK_TIMEOUT", 0),
        ("LOCK_TIMEOUT", "soon"),
        ("RETRY_AFTER", True),
        ("SUBMIT_TOKEN_TTL", 0),
        ("PURGE_BATCH_SIZE", 0),
        ("PURGE_BATCH_SIZE", 10.5),
    ],
)
def test_e004_not_a_positive_number(name: str, value: Any) -> None:
    only("E004", IDEMPOTENCY={name: value})


@pytest.mark.parametrize(
    "setting",
    [
        {"WAIT": 0},
        {"WAIT": 2.5},
        {"TTL": 0.5, "LEASE": 0.5},
        {"PURGE_BATCH_SIZE": 1},
        {"MAX_RESPONSE_BYTES": None},
        {"MAX_RESPONSE_BYTES": 1},
        {"LOCK_TIMEOUT": None},
        {"LOCK_TIMEOUT": 2},
    ],
)
def test_e004_accepts_valid_numbers(setting: dict[str, Any]) -> None:
    assert ids(IDEMPOTENCY=setting) == []


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("SCOPE", "idempotency.scopes.no_such_scope"),
        ("FINGERPRINT", "nodots"),
        ("FINGERPRINT", 42),
    ],
)
def test_e005_dotted_path_not_importable(name: str, value: Any) -> None:
    only("E005", IDEMPOTENCY={name: value})


def test_e005_accepts_objects_instead_of_paths() -> None:
    assert ids(IDEMPOTENCY={"SCOPE": lambda request: "x"}) == []


def test_e014_anonymous() -> None:
    only("E014", IDEMPOTENCY={"ANONYMOUS": "allow"})


@pytest.mark.parametrize(
    "setting",
    [
        {"HEADER": "Idempotency Key"},
        {"HEADER": ""},
        {"HEADER": "Idempotency-Key:"},
        {"HEADER": None},
        {"SUBMIT_TOKEN_HEADER": "X-Submit/Token"},
        {"FINGERPRINT_HEADERS": ["Accept", "Bad Header"]},
        {"REPLAY_HEADERS": ["Location", "Bad:Header"]},
    ],
)
def test_e010_header_names(setting: dict[str, Any]) -> None:
    only("E010", IDEMPOTENCY=setting)


def test_e010_accepts_token_names() -> None:
    assert ids(IDEMPOTENCY={"HEADER": "X-Request-Key_2", "FINGERPRINT_HEADERS": ["Accept"]}) == []


@pytest.mark.parametrize(
    "value",
    [
        ["Location", "Set-Cookie"],
        ["set-cookie"],
        ["Transfer-Encoding"],
    ],
)
def test_e011_replay_headers(value: Any) -> None:
    only("E011", IDEMPOTENCY={"REPLAY_HEADERS": value})


@pytest.mark.parametrize(
    "setting",
    [
        {"FINGERPRINT_HEADERS": "Accept"},
        {"REPLAY_HEADERS": "Location"},
        {"REPLAY_HEADERS": ["Location", 7]},
        {"REPLAY_HEADERS": None},
    ],
)
def test_e004_header_lists_that_are_not_lists_of_names(setting: dict[str, Any]) -> None:
    only("E004", IDEMPOTENCY=setting)


@pytest.mark.parametrize("value", [0, -1, 1.5, "1MB", True])
def test_e004_max_response_bytes(value: Any) -> None:
    only("E004", IDEMPOTENCY={"MAX_RESPONSE_BYTES": value})


def test_e014_atomic_claim_choices() -> None:
    only("E014", IDEMPOTENCY={"ATOMIC_CLAIM": "last"})
    assert ids(IDEMPOTENCY={"ATOMIC_CLAIM": "optimistic"}) == []


def test_e016_ttl_shorter_than_the_lease() -> None:
    only("E016", IDEMPOTENCY={"TTL": 30, "LEASE": 60})
    assert ids(IDEMPOTENCY={"TTL": 60, "LEASE": 60}) == []


@pytest.mark.parametrize("value", ["ledger", [1]])
def test_e004_atomic_databases_not_a_list_of_aliases(value: Any) -> None:
    only("E004", IDEMPOTENCY={"ATOMIC_DATABASES": value}, DATABASES=two_databases())


def test_e018_metrics_without_prometheus_client(monkeypatch: pytest.MonkeyPatch) -> None:

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "prometheus_client" else find_spec(name, *a),
    )
    only("E018", IDEMPOTENCY={"METRICS": True})
    assert ids(IDEMPOTENCY={"METRICS": False}) == []


def test_e020_opentelemetry_without_its_api(monkeypatch: pytest.MonkeyPatch) -> None:

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name.startswith("opentelemetry") else find_spec(name, *a),
    )
    only("E043", IDEMPOTENCY={"OPENTELEMETRY": True})
    assert ids(IDEMPOTENCY={"OPENTELEMETRY": False}) == []


def test_w041_the_default_problem_type_base_asks_for_the_projects_own() -> None:
    with override_settings(IDEMPOTENCY={}):
        (warning,) = check_problem_documentation()
    assert warning.id == "idempotency.W041"
    assert "https://django-idempotency.dev/problems/" in warning.msg
    assert "PROBLEM_TYPE_BASE" in (warning.hint or "")
    with override_settings(IDEMPOTENCY={"PROBLEM_TYPE_BASE": "https://api.example.com/e/"}):
        assert check_problem_documentation() == []


def test_w041_is_reported_by_check_deploy_only() -> None:
    def report(*args: str) -> str:
        out = StringIO()
        try:
            call_command("check", *args, databases=[], stdout=out, stderr=out)
        except SystemCheckError as exc:  # other deploy checks may fail on test settings
            out.write(str(exc))
        return out.getvalue()

    with override_settings(IDEMPOTENCY={}, DATABASES=one_database()):
        assert "idempotency.W041" not in report()
        assert "idempotency.W041" in report("--deploy")
