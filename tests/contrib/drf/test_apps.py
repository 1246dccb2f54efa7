"""``idempotency/contrib/drf/apps.py``: the app registers DRF with the view frameworks, so
that ``@idempotent`` and the middleware know DRF's requests and views; registering again
(another ``ready()``) replaces it."""

from __future__ import annotations

from django.apps import apps
from django.views import View
from rest_framework.request import Request
from rest_framework.views import APIView

from idempotency.contrib.drf.mixins import IdempotentMixin
from idempotency.http import frameworks
from idempotency.http.options import Policy


class Plain(View):
    pass


class Api(APIView):
    pass


def test_drf_views_and_requests_are_known_once_the_app_is_ready() -> None:
    assert Request in frameworks.request_types()
    assert frameworks.owns(Api) and not frameworks.owns(Plain)
    wrapped = frameworks.view_class(Api, Policy())
    assert wrapped is not None and issubclass(wrapped, IdempotentMixin)
    assert frameworks.handles_keys(wrapped)


def test_a_second_ready_replaces_the_registration() -> None:
    before = frameworks.request_types()
    apps.get_app_config("idempotency_drf").ready()
    assert frameworks.request_types() == before
    assert frameworks.request_types().count(Request) == 1
