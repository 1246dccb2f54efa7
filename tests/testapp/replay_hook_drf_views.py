"""DRF's views with an ``on_replay`` hook (issue 46, item 4): ``@idempotent`` on a DRF
method, ``IdempotentMixin`` with the method overridden or the attribute set, or neither (the
``ON_REPLAY`` setting applies). Routed by tests/testapp/replay_hook_urls.py where DRF is
installed; they note their hooks' calls in the plain views' ``CALLS``."""

from __future__ import annotations

from django.http import HttpResponse
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from idempotency import idempotent
from idempotency.contrib.drf.mixins import IdempotentMixin
from idempotency.core.job import ReplayedRecord
from tests.testapp.replay_hook_views import CALLS, ran, stamp


class DecoratedApi(APIView):
    @idempotent(on_replay=stamp("drf-method"))
    def post(self, request: Request) -> Response:
        return Response(ran(request), status=status.HTTP_201_CREATED)


class MethodApi(IdempotentMixin, APIView):
    """The DRF way: the mixin's method, overridden."""

    def on_replay(self, request: Request, response: HttpResponse, record: ReplayedRecord) -> None:
        CALLS.append(("mixin-method", request.path, record.key))
        response["X-Trace-Id"] = f"mixin-method-{request.META.get('HTTP_X_TRACE', '')}"
        response["X-View"] = type(self).__name__

    def post(self, request: Request) -> Response:
        return Response(ran(request), status=status.HTTP_201_CREATED)


class AttributeApi(IdempotentMixin, APIView):
    idempotency_on_replay = stamp("mixin-attribute")

    def post(self, request: Request) -> Response:
        return Response(ran(request), status=status.HTTP_201_CREATED)


class PlainMixinApi(IdempotentMixin, APIView):
    """Neither: the ``ON_REPLAY`` setting applies."""

    def post(self, request: Request) -> Response:
        return Response(ran(request), status=status.HTTP_201_CREATED)
