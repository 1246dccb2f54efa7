"""The test app's views (``/t/``): the plain Django ones, and DRF's where DRF is installed
(not in the ``no-drf`` run, tests/settings_no_drf.py)."""

from __future__ import annotations

from django.apps import apps
from django.urls import include, path

from idempotency import idempotency_exempt
from tests.testapp import views

urlpatterns = [
    path("function/", views.function_view),
    path("lease-function/", views.lease_function_view),
    path("outcome/", views.outcome_view),
    path("crash/", views.crash_view),
    path("fail-open/", views.fail_open_view),
    path("context/", views.context_view),
    path("phases/", views.phases_view),
    path("stale-owner/", views.stale_owner_view),
    path("async/", views.async_view),
    path("django-cbv/", views.DjangoEffectView.as_view()),
    path("plain/", views.plain_view),
    path("plain-exempt/", idempotency_exempt(views.plain_view)),
    path("stream/", views.stream_view),
    path("file/", views.file_view),
    path("big/", views.big_view),
    path("two-databases/", views.two_database_view),
    path("store-database-only/", views.store_database_only_view),
    path("data/", include("tests.testapp.data_views")),
    path("gates/", include("tests.testapp.gate_views")),
]

if apps.is_installed("rest_framework"):
    from rest_framework.routers import SimpleRouter

    from tests.testapp import drf_views

    router = SimpleRouter()
    router.register("viewset", drf_views.EffectViewSet, basename="effect")
    urlpatterns += [
        path("api/", drf_views.EffectApi.as_view()),
        path("api-view/", drf_views.api_view_function),
        path("plain-api/", drf_views.PlainApi.as_view()),
        path("locking/", drf_views.LockingApi.as_view()),
        path("", include(router.urls)),
    ]
