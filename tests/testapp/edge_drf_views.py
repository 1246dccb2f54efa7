"""DRF's views for the contract's edges: forms, uploads, a lost database session, Vary.

Routed by tests/testapp/edge_urls.py where DRF is installed; they count their executions
in the plain views' :data:`~tests.testapp.edge_views.RUNS`, as those do.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from idempotency.contrib.drf.mixins import IdempotentMixin
from tests.testapp.edge_views import killed, ran, sizes


class FormApi(IdempotentMixin, APIView):
    permission_classes = [AllowAny]

    def post(self, request: Request) -> Response:
        run = ran(request)
        files = {name: [f.size for f in request.FILES.getlist(name)] for name in request.FILES}
        return Response({"run": run, "files": files}, status=201)


class UploadApi(IdempotentMixin, APIView):
    permission_classes = [AllowAny]
    authentication_classes: list[Any] = []

    def get_idempotency_scope(self, request: HttpRequest) -> str:
        return "uploads"

    def post(self, request: Request) -> Response:
        return Response({"run": ran(request), "files": sizes(request)}, status=201)


class KilledApi(IdempotentMixin, APIView):
    idempotency_mode = "lease"

    def post(self, request: Request) -> Response:
        return Response(killed(request), status=201)


class VaryApi(IdempotentMixin, APIView):
    def post(self, request: Request) -> Response:
        return Response({"run": ran(request)}, status=201, headers={"Vary": "Accept-Encoding"})
