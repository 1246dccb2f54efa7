"""URLs of the composition views (``/m/x/`` in tests/urls.py): the plain Django ones, and
DRF's where DRF is installed."""

from __future__ import annotations

from django.apps import apps
from django.contrib.auth.views import LoginView
from django.urls import path

from tests.testapp import composition_views as views

urlpatterns = [
    path("plain/", views.plain),
    path("non-atomic/", views.non_atomic),
    path("raising/", views.raising),
    path("streaming/", views.streaming),
    path("echo/", views.echo_body),
    path("dispatch-decorated/", views.DispatchDecorated.as_view()),
    path("hidden-decorated/", views.hidden_decorated),
    path("login/", LoginView.as_view()),
]

if apps.is_installed("rest_framework"):
    from tests.testapp import composition_drf_views as drf_views

    urlpatterns += [
        path("api/", drf_views.Api.as_view()),
        path("echo-api/", drf_views.EchoApi.as_view()),
    ]
