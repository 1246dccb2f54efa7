"""Test-only views guarded by one-time submit tokens."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from rest_framework.decorators import api_view
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from idempotency.contrib.drf.tokens import SubmitTokenPermission
from idempotency.tokens import require_submit_token


@require_submit_token("checkout")
def checkout_view(request: HttpRequest) -> HttpResponse:
    if request.method == "GET":
        return JsonResponse({"form": "checkout"})
    return JsonResponse({"ok": True}, status=201)


@require_submit_token("checkout")
async def async_checkout_view(request: HttpRequest) -> HttpResponse:
    return JsonResponse({"ok": True, "async": True}, status=201)


class TransferApi(APIView):
    @require_submit_token("transfer")
    def post(self, request: Request) -> Response:
        return Response({"transferred": True}, status=201)


@api_view(["POST"])
@require_submit_token("api-view")
def api_function_view(request: Request) -> Response:
    return Response({"ok": True}, status=201)


class OrderApi(APIView):
    permission_classes = [IsAuthenticated, SubmitTokenPermission]
    submit_token_purpose = "order"

    def get(self, request: Request) -> Response:
        return Response({"form": "order"})

    def post(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return Response({"ordered": True}, status=201)


class UnnamedPurposeApi(APIView):
    permission_classes = [SubmitTokenPermission]

    def post(self, request: Request) -> Response:
        return Response({}, status=201)
