"""URLs of the contract's edge views (``ROOT_URLCONF`` in the edge tests, ``/e/`` in
tests/urls.py): the plain Django ones, and DRF's where DRF is installed."""

from __future__ import annotations

from django.apps import apps
from django.urls import path

from tests.testapp import edge_views as views

urlpatterns = [
    path("form/", views.form_view),
    path("async-form/", views.async_form_view),
    path("vary/", views.vary_view),
    path("async-vary/", views.async_vary_view),
    path("slow/", views.slow_view),
    path("async-slow/", views.async_slow_view),
    path("killed/", views.killed_view),
    path("async-killed/", views.async_killed_view),
    path("upload/", views.upload_view),
    path("async-upload/", views.async_upload_view),
]

if apps.is_installed("rest_framework"):
    from tests.testapp import edge_drf_views as drf_views

    urlpatterns += [
        path("api-form/", drf_views.FormApi.as_view()),
        path("api-vary/", drf_views.VaryApi.as_view()),
        path("api-killed/", drf_views.KilledApi.as_view()),
        path("api-upload/", drf_views.UploadApi.as_view()),
    ]
