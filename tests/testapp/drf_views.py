"""DRF views of the test app, each with a countable side effect (the plain Django ones:
tests.testapp.views), and DRF's among the gates and the data views (routed by
tests.testapp.gate_views and tests.testapp.data_views)."""

from __future__ import annotations

import time
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils.decorators import method_decorator
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action, api_view
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.permissions import IsAdminUser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from idempotency import idempotent
from idempotency.contrib.drf.mixins import IdempotentMixin
from idempotency.contrib.drf.tokens import SubmitTokenIssueView
from tests.testapp.executions import record_execution
from tests.testapp.models import Effect, Wallet
from tests.testapp.views import _effect, _label


class EffectSerializer(serializers.ModelSerializer[Effect]):
    class Meta:
        model = Effect
        fields = ["id", "label", "amount"]


class EffectApi(APIView):
    """A DRF view with @idempotent on its method."""

    @idempotent
    def post(self, request: Request) -> Response:
        if request.data.get("invalid"):
            raise ValidationError({"label": ["This field is invalid."]})
        if request.data.get("missing"):
            raise NotFound("no such thing")
        effect = _effect(request)
        if request.GET.get("raise"):
            raise RuntimeError("boom")
        return Response(EffectSerializer(effect).data, status=status.HTTP_201_CREATED)


class EffectViewSet(IdempotentMixin, viewsets.ModelViewSet[Effect]):
    """A viewset whose unsafe actions all take part through the mixin."""

    queryset = Effect.objects.all()
    serializer_class = EffectSerializer

    def perform_create(self, serializer: Any) -> None:
        record_execution(_label(self.request))
        delay = float(self.request.GET.get("sleep", "0"))
        with transaction.atomic():
            serializer.save()
            Wallet.objects.filter(pk=1).update(balance=F("balance") - serializer.instance.amount)
            if delay:
                time.sleep(delay)  # real time: the view's work, as long as the request asks

    @action(detail=True, methods=["post"])
    def bump(self, request: Request, pk: str | None = None) -> Response:
        effect = self.get_object()
        Effect.objects.filter(pk=effect.pk).update(amount=F("amount") + 1)
        effect.refresh_from_db()
        return Response(EffectSerializer(effect).data)


@api_view(["POST"])
@idempotent
def api_view_function(request: Request) -> Response:
    effect = _effect(request)
    return Response({"id": effect.pk}, status=201)


class PlainApi(APIView):
    """No mixin: used under the middleware."""

    def post(self, request: Request) -> Response:
        effect = _effect(request)
        return Response({"id": effect.pk}, status=201)


class LockingApi(APIView):
    """Locks the wallet row without waiting: fails while another transaction holds it."""

    @idempotent
    def post(self, request: Request) -> Response:
        with transaction.atomic():
            Wallet.objects.select_for_update(nowait=True).get(pk=1)
            effect = _effect(request)
        return Response({"id": effect.pk}, status=201)


@method_decorator(idempotent, name="dispatch")
class AdminReportApi(APIView):
    """A gate: DRF, decorated on dispatch (keys used to be handled before initial())."""

    permission_classes = [IsAdminUser]

    def post(self, request: Request) -> Response:
        record_execution(str(request.META.get("HTTP_IDEMPOTENCY_KEY", "-")))
        return Response({"report": "every customer's IBAN"}, status=201)


class IdempotentTokenView(IdempotentMixin, SubmitTokenIssueView):
    """The token view with keys handled: its answers say no-store."""
