"""DRF's views among those that show the middleware composing with Django's request
handling (the plain ones: tests/testapp/composition_views.py); routed by
tests/testapp/composition_urls.py where DRF is installed."""

from __future__ import annotations

from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from tests.testapp.matrix_bodies import work


class Api(APIView):
    def post(self, request: Request) -> Response:
        return Response(work(request), status=201)


class EchoApi(APIView):
    """Answers with what DRF parsed, after the fingerprint read the raw body."""

    def put(self, request: Request) -> Response:
        work(request, 1)
        return Response({"data": request.data}, status=200)
