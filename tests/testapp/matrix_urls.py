"""URLs of the interface matrix (``<interface>/<view kind>/``)."""

from __future__ import annotations

from django.urls import path

from tests.testapp.matrix_views import CELLS

urlpatterns = [path(f"{name}/", view) for name, (view, _body, _async) in CELLS.items()]
