from __future__ import annotations

from django.urls import include, path
from rest_framework.routers import SimpleRouter

from idempotency import idempotency_exempt
from tests.testapp import views

router = SimpleRouter()
router.register("viewset", views.EffectViewSet, basename="effect")

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
    path("api/", views.EffectApi.as_view()),
    path("django-cbv/", views.DjangoEffectView.as_view()),
    path("api-view/", views.api_view_function),
    path("plain/", views.plain_view),
    path("plain-exempt/", idempotency_exempt(views.plain_view)),
    path("plain-api/", views.PlainApi.as_view()),
    path("stream/", views.stream_view),
    path("file/", views.file_view),
    path("big/", views.big_view),
    path("two-databases/", views.two_database_view),
    path("locking/", views.LockingApi.as_view()),
    path("store-database-only/", views.store_database_only_view),
    path("data/", include("tests.testapp.data_views")),
    path("gates/", include("tests.testapp.gate_views")),
    path("", include(router.urls)),
]
