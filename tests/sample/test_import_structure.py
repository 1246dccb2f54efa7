"""The sample's dependency direction: accounts <- orders <- payments, and no import circle.

Every import in the sample's modules is read from the source (``ast``), those inside
functions too (a lazy import is still a dependency), except the ones under ``if
TYPE_CHECKING:`` (never run). Orders learn of payments through a signal
(``orders.signals.order_paid_cancelled``) and the outbox publishes to its consumer by
task name, so neither needs an import back.
"""

from __future__ import annotations

from pathlib import Path

from tests.support import imports
from tests.support.imports import circles, imports_of

PACKAGES = ("accounts", "orders", "payments", "config")
#: Which sample app may import which (one direction; config, the project, sits on top).
MAY_IMPORT = {
    "accounts": {"accounts"},
    "orders": {"accounts", "orders"},
    "payments": {"accounts", "orders", "payments"},
}


def import_graph() -> dict[str, set[str]]:
    return imports.import_graph(imports.modules(PACKAGES))


def test_the_finder_sees_a_circle_and_lazy_imports(tmp_path: Path) -> None:
    """The check itself can fail: a planted circle through a lazy import is found."""
    graph = {"a.x": {"a.y"}, "a.y": {"b.z"}, "b.z": {"a.x"}, "c": {"a.x"}}
    assert circles(graph) == [["a.x", "a.y", "b.z"]]
    source = tmp_path / "mod.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from orders.models import Order\n"
        "def f():\n    from payments.services import payment_pay\n"
        "from accounts import money\n"
    )
    known = {"orders.models", "payments.services", "accounts", "accounts.money"}
    assert imports_of("x.mod", source, known) == {"payments.services", "accounts", "accounts.money"}


def test_the_sample_has_no_import_circle() -> None:
    graph = import_graph()
    assert "orders.services" in graph and "payments.services" in graph["payments.apis"]
    assert circles(graph) == []


def test_each_app_imports_only_the_apps_below_it() -> None:
    wrong = [
        f"{module} imports {target}"
        for module, targets in import_graph().items()
        for target in targets
        if module.split(".")[0] in MAY_IMPORT
        and target.split(".")[0] in MAY_IMPORT
        and target.split(".")[0] not in MAY_IMPORT[module.split(".")[0]]
    ]
    assert wrong == []
