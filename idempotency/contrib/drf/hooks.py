"""Glue between the shared request flow and DRF views (exception handling, rendering)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponseBase
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from idempotency.http.answers import Convert, Finalize


def view_of(request: Any) -> APIView | None:
    """The DRF view handling ``request`` (DRF puts it in the parser context)."""
    if not isinstance(request, Request):
        return None
    view = (getattr(request, "parser_context", None) or {}).get("view")
    return view if isinstance(view, APIView) else None


def hooks(view: APIView, request: Request | HttpRequest) -> tuple[Convert, Finalize]:
    """How to turn the view's exceptions into responses, and responses into bytes."""

    def convert(exc: Exception) -> HttpResponseBase:
        return view.handle_exception(exc)

    def finalize(response: HttpResponseBase) -> HttpResponseBase:
        if isinstance(response, Response) and not response.is_rendered:
            response = view.finalize_response(
                request,  # type: ignore[arg-type]  # a DRF view's handler gets DRF's Request
                response,
                *view.args,
                **view.kwargs,
            )
            response.render()
        return response

    return convert, finalize


__all__ = ["hooks", "view_of"]
