"""A view's options (idempotency/http/options.py): refused when out of range, resolved
over the settings (most specific wins), and resolved once per policy until the
settings change."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import RequestFactory, override_settings

from idempotency.http.options import Policy, resolve
from idempotency.scopes import shared

rf = RequestFactory()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"on_replay": "not callable"}, "on_replay must be a function"),
        ({"redact": "card"}, "redact must be a list of field names"),
        ({"max_new_records": 0}, "max_new_records must be a positive integer"),
        ({"max_new_records": True}, "max_new_records must be a positive integer"),
        ({"record_window": -1}, "record_window must be a non-negative number"),
        ({"record_window": 0}, "record_window must be positive"),
        ({"error_ttl": "1"}, "error_ttl must be a non-negative number"),
        ({"on_store_unavailable": "retry"}, "on_store_unavailable must be one of"),
        ({"claim": "last"}, "claim must be one of"),
        ({"databases": "default"}, "databases must be a list of aliases"),
    ],
)
def test_an_option_out_of_range_is_refused(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Policy(**options)


@override_settings(IDEMPOTENCY={"REDACT_FIELDS": ["pan"], "ERROR_TTL": 30, "TTL": 600})
def test_the_view_option_wins_over_the_setting_and_redact_adds_to_it() -> None:
    assert Policy().get_redact() == {"pan"}
    assert Policy(redact=["cvv"]).get_redact() == {"pan", "cvv"}
    assert Policy().get_ttl_for(404) == 30
    assert Policy(error_ttl=0).get_ttl_for(404) == 0
    assert Policy(error_ttl=0).get_ttl_for(500) == 600
    assert Policy(ttl=5).get_ttl_for(201) == 5


def test_a_named_scope_is_a_part_of_each_callers_records_and_shared_is_everyones() -> None:
    request = rf.post("/")
    request.user = type("User", (), {"is_authenticated": True, "pk": 7, "_meta": None})()
    caller = Policy().get_scope(request)
    assert caller is not None
    assert Policy(scope="shop").get_scope(request) == f"shop/{caller}"
    assert Policy(scope=shared("all")).get_scope(request) == str(shared("all"))
    assert Policy(scope=lambda request: "").get_scope(request) is None


@pytest.mark.django_db
def test_resolve_is_kept_per_policy_until_the_settings_change() -> None:
    policy = Policy(ttl=9, error_ttl=2)
    resolved = resolve(policy)
    assert resolve(policy) is resolved
    assert (resolved.ttl, resolved.ttl_for(409), resolved.ttl_for(500)) == (9.0, 2.0, 9.0)
    assert resolve(Policy(ttl=9, error_ttl=2)) is not resolved  # another policy, its own
    with override_settings(IDEMPOTENCY={"LEASE": 77}):
        assert resolve(policy).lease == 77.0
    assert resolve(policy) is not resolved
