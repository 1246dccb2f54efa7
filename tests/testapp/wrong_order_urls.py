"""A URLconf with ``@idempotent`` above an access decorator, for check E042 only."""

from __future__ import annotations

from tests.testapp.gate_views import wrong_order

urlpatterns = wrong_order
