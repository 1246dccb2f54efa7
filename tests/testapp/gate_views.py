"""Views whose access checks a replay must keep (issue 36, finding 9), under
``/t/gates/``: the plain Django ones, and DRF's ``AdminReportApi``
(tests/testapp/drf_views.py) where DRF is installed."""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.contrib.auth.decorators import login_required, user_passes_test
from django.contrib.auth.mixins import UserPassesTestMixin
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import path
from django.utils.decorators import method_decorator
from django.views import View

from idempotency import idempotent
from tests.testapp.executions import record_execution


def _ran(request: Any) -> None:
    record_execution(str(request.META.get("HTTP_IDEMPOTENCY_KEY", "-")))


class StaffOnly(UserPassesTestMixin):
    raise_exception = True

    def test_func(self) -> bool:
        return bool(self.request.user.is_staff)  # type: ignore[attr-defined]


@method_decorator(idempotent, name="dispatch")
class StaffDispatchView(StaffOnly, View):
    """Django, decorated on dispatch, its access check in the mixin's dispatch."""

    def post(self, request: HttpRequest) -> HttpResponse:
        _ran(request)
        return JsonResponse({"report": "staff only"}, status=201)


class StaffView(StaffOnly, View):
    """Django, undecorated: under the middleware."""

    def post(self, request: HttpRequest) -> HttpResponse:
        _ran(request)
        return JsonResponse({"report": "staff only"}, status=201)


@user_passes_test(lambda user: user.is_staff)
def staff_function_view(request: HttpRequest) -> HttpResponse:
    """A function view whose check is a decorator: the middleware leaves it alone."""
    _ran(request)
    return JsonResponse({"report": "staff only"}, status=201)


def form_view(request: HttpRequest) -> HttpResponse:
    """A plain function view under the middleware and CsrfViewMiddleware."""
    _ran(request)
    return JsonResponse({"done": True}, status=201)


@login_required
@idempotent
def right_order_view(request: HttpRequest) -> HttpResponse:
    _ran(request)
    return JsonResponse({"done": True}, status=201)


@idempotent
@login_required
def wrong_order_view(request: HttpRequest) -> HttpResponse:
    _ran(request)
    return JsonResponse({"done": True}, status=201)


urlpatterns = [
    path("staff-dispatch/", StaffDispatchView.as_view(), name="staff-dispatch"),
    path("staff/", StaffView.as_view(), name="staff"),
    path("staff-function/", staff_function_view, name="staff-function"),
    path("form/", form_view, name="form"),
    path("right-order/", right_order_view, name="right-order"),
]

if apps.is_installed("rest_framework"):
    from tests.testapp import drf_views

    urlpatterns += [path("admin-report/", drf_views.AdminReportApi.as_view(), name="admin-report")]

#: ``@idempotent`` above an access decorator (check E042): routed only by the check's test
#: (``tests.testapp.wrong_order_urls``), so no other test's checks see it.
wrong_order = [path("wrong-order/", wrong_order_view, name="wrong-order")]
