"""``idempotency/contrib/drf/apps.py``: the app registers DRF with the HTTP interfaces, so
that ``@idempotent`` and the middleware know DRF's requests and views; registering again
(another ``ready()``) replaces it."""

from __future__ import annotations

from django.apps import apps
from django.views import View
from rest_framework.request import Request
from rest_framework.test import APIRequestFactory
from rest_framework.views import APIView

from idempotency.contrib.drf.mixins import DjangoRestFramework, IdempotentMixin
from idempotency.http import views
from idempotency.http.options import Policy


class Plain(View):
    pass


class Api(APIView):
    pass


def test_drf_views_and_requests_are_known_once_the_app_is_ready() -> None:
    request = Request(APIRequestFactory().post("/"))  # not a Django HttpRequest
    assert views.split_view_args((request,), decorator="@idempotent") == (None, request)
    assert views.owns(Api) and not views.owns(Plain)
    wrapped = views.view_class(Api, Policy())
    assert wrapped is not None and issubclass(wrapped, IdempotentMixin)
    assert views.handles_keys(wrapped)


def test_a_second_ready_replaces_the_registration() -> None:
    apps.get_app_config("idempotency_drf").ready()
    assert sum(isinstance(each, DjangoRestFramework) for each in views._registered) == 1
