"""One resolver of options (issue 19, item 11): views, functions and tasks resolve the
options they share through ``CallPolicy``; the decorators' keywords, the mixin's and the
task's attributes and the documented lists all name exactly its options."""

from __future__ import annotations

import inspect
import re
import typing

import pytest
from django.core.exceptions import ImproperlyConfigured

from idempotency import idempotent, idempotent_function
from idempotency.contrib.celery import IdempotentTask, idempotent_task
from idempotency.contrib.drf.mixins import IdempotentMixin
from idempotency.core.job import CallPolicy
from idempotency.http.options import Policy
from idempotency.stores.cache import CacheStore
from idempotency.stores.database import DatabaseStore
from tests.support.services import ROOT

SHARED = CallPolicy.option_names()


def overload_keywords(func: typing.Any) -> set[str]:
    """The keyword-only parameters of ``func`` and of its overloads."""
    signatures = [inspect.signature(o) for o in typing.get_overloads(func)]
    signatures.append(inspect.signature(func))
    return {
        name
        for signature in signatures
        for name, parameter in signature.parameters.items()
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY
    }


def test_views_extend_the_shared_policy() -> None:
    assert issubclass(Policy, CallPolicy)
    assert Policy.option_names()[: len(SHARED)] == SHARED
    assert set(SHARED) == {"ttl", "lease", "wait", "store", "mode", "store_errors"}


def test_idempotent_takes_every_view_option_and_the_mixin_has_each_attribute() -> None:
    assert overload_keywords(idempotent) == set(Policy.option_names())
    for name in Policy.option_names():
        if name != "scope":  # a method: get_idempotency_scope
            assert hasattr(IdempotentMixin, f"idempotency_{name}"), name


def test_functions_and_tasks_take_every_shared_option() -> None:
    assert set(SHARED) <= overload_keywords(idempotent_function)
    assert set(SHARED) <= overload_keywords(idempotent_task)
    for name in SHARED:
        assert hasattr(IdempotentTask, f"idempotency_{name}"), name


def test_the_documented_view_options_are_the_policys() -> None:
    text = (ROOT / "docs" / "howto" / "views.md").read_text()
    paragraph = text[text.index("## Policy layers") :].split("\n\n")[1]
    named = set(re.findall(r"`(\w+)`", paragraph))
    assert set(Policy.option_names()) <= named


def test_one_mode_resolution_and_validation() -> None:
    for kind in (CallPolicy, Policy):
        with pytest.raises(ValueError, match="mode must be one of"):
            kind(mode="sometimes")
        with pytest.raises(ValueError, match="lease must be positive"):
            kind(lease=0)
    with pytest.raises(ValueError, match="mode must be one of"):
        idempotent_function(key="k", mode="sometimes")
    with pytest.raises(ValueError, match="mode must be one of"):
        idempotent_task(mode="sometimes")
    assert CallPolicy(mode="auto").get_mode(DatabaseStore()) == "atomic"
    assert CallPolicy(mode="auto").get_mode(CacheStore()) == "lease"
    with pytest.raises(ImproperlyConfigured, match="cannot run atomic mode"):
        CallPolicy(mode="atomic").get_mode(CacheStore())
    assert Policy(mode="lease").merged(mode=None, ttl=5).get_ttl() == 5.0


def test_the_mixin_passes_claim_and_databases_on() -> None:
    class View(IdempotentMixin):
        idempotency_claim = "optimistic"
        idempotency_databases = ["ledger"]
        idempotency_ttl = 7

    policy = View().get_idempotency_policy()
    assert (policy.claim, policy.databases, policy.ttl) == ("optimistic", ["ledger"], 7)
