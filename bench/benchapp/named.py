"""One view that hands a request to the view its URL names: every benchmark path then
costs Django's resolver the same (see :mod:`bench.urls`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import Http404, HttpRequest, HttpResponseBase


def named_views(views: dict[str, Callable[..., Any]]) -> Callable[..., HttpResponseBase]:
    """A view of ``request, name`` that calls ``views[name](request)``, or answers 404."""

    def by_name(request: HttpRequest, name: str) -> HttpResponseBase:
        view = views.get(name)
        if view is None:
            raise Http404(name)
        response: HttpResponseBase = view(request)
        return response

    by_name.csrf_exempt = True  # type: ignore[attr-defined]  # the views it calls decide
    return by_name
