"""URLs of the views with an ``on_replay`` hook (``ROOT_URLCONF`` in tests/http/test_handler.py):
the plain Django ones and Django Ninja's, and DRF's where DRF is installed."""

from __future__ import annotations

from django.apps import apps
from django.urls import path

from tests.testapp import replay_hook_views as views

urlpatterns = [
    path("function/", views.make(views.stamp("function"))),
    path("plain/", views.make(None)),
    path("async/", views.async_view),
    path("cookie/", views.make(views.set_cookie)),
    path("status/", views.make(views.change_status)),
    path("body/", views.make(views.change_body)),
    path("hop-by-hop/", views.make(views.hop_by_hop)),
    path("unmark/", views.make(views.unmark)),
    path("return/", views.make(views.return_new)),
    path("bare/", views.bare_view),
    path("n/", views.api.urls),
]

if apps.is_installed("rest_framework"):
    from tests.testapp import replay_hook_drf_views as drf_views

    urlpatterns += [
        path("drf-method/", drf_views.DecoratedApi.as_view()),
        path("mixin-method/", drf_views.MethodApi.as_view()),
        path("mixin-attribute/", drf_views.AttributeApi.as_view()),
        path("mixin-plain/", drf_views.PlainMixinApi.as_view()),
    ]
