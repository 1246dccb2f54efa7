"""The test settings fail a test when the library's own code uses something the installed
Django deprecates (pyproject.toml's ``filterwarnings``), whatever that Django names its
``RemovedInDjango…Warning`` classes; the same warning from elsewhere stays a warning.

A deprecated call needs a module of ``idempotency`` to come from: the probe compiles its
one line as such a module (Django attributes a deprecation to its caller's module, as
``warnings.warn`` does) rather than shipping a deprecated call in the package."""

from __future__ import annotations

import warnings

import pytest
from django.utils.deprecation import RemovedAfterNextVersionWarning, RemovedInNextVersionWarning

DEPRECATIONS = [RemovedInNextVersionWarning, RemovedAfterNextVersionWarning]


def warn_from(module: str, category: type[Warning]) -> None:
    """Warns ``category`` from code whose module is ``module``, as Django's deprecated
    APIs do from their caller (``stacklevel=2``)."""
    code = compile(
        "def deprecated():\n    warnings.warn('deprecated', category, stacklevel=2)\n"
        "def caller():\n    deprecated()\n",
        f"<{module}>",
        "exec",
    )
    namespace = {"__name__": module, "warnings": warnings, "category": category}
    exec(code, namespace)
    namespace["caller"]()  # type: ignore[operator]


@pytest.mark.parametrize("category", DEPRECATIONS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("module", ["idempotency", "idempotency.admin", "idempotency.http.x"])
def test_a_deprecation_from_the_library_fails(module: str, category: type[Warning]) -> None:
    with pytest.raises(category, match="deprecated"):
        warn_from(module, category)


@pytest.mark.parametrize("category", DEPRECATIONS, ids=lambda c: c.__name__)
def test_a_deprecation_pointed_at_a_library_definition_fails(category: type[Warning]) -> None:
    # Django 6.1 flags an override's old signature where it is defined (warn_explicit
    # with the module of the overriding method), as with get_actions in idempotency.admin
    with pytest.raises(category, match="old signature"):
        warnings.warn_explicit("old signature", category, "admin.py", 1, module="idempotency.admin")


@pytest.mark.parametrize("category", DEPRECATIONS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("module", ["rest_framework.views", "idempotency_other", "tests.x"])
def test_the_same_deprecation_from_elsewhere_stays_a_warning(
    module: str, category: type[Warning]
) -> None:
    with warnings.catch_warnings(record=True) as caught:  # keeps the settings' filters
        warn_from(module, category)
    assert [(w.category, str(w.message)) for w in caught] == [(category, "deprecated")]
