"""URLs of the interface matrix (``<interface>/<view kind>/``) and of the composition views."""

from __future__ import annotations

from django.contrib.auth.views import LoginView
from django.urls import path

from tests.testapp import composition_views as views
from tests.testapp.matrix_views import CELLS

urlpatterns = [path(f"{name}/", view) for name, (view, _body, _async) in CELLS.items()]
urlpatterns += [
    path("x/plain/", views.plain),
    path("x/non-atomic/", views.non_atomic),
    path("x/api/", views.Api.as_view()),
    path("x/raising/", views.raising),
    path("x/streaming/", views.streaming),
    path("x/echo/", views.echo_body),
    path("x/echo-api/", views.EchoApi.as_view()),
    path("x/dispatch-decorated/", views.DispatchDecorated.as_view()),
    path("x/hidden-decorated/", views.hidden_decorated),
    path("x/login/", LoginView.as_view()),
]
