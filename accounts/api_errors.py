"""Mapping domain errors to API errors, shared by the sample apps' APIs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from rest_framework.exceptions import APIException

E = TypeVar("E", bound=Exception)


def api_error_for(exc: E, table: Mapping[type[E], type[APIException]]) -> APIException:
    """The API error (problem+json with a stable code) that ``table`` names for ``exc``'s
    class or its nearest base; a plain 500 ``APIException`` for anything unmapped."""
    for cls in type(exc).__mro__:
        api_error = table.get(cls)
        if api_error is not None:
            return api_error(detail=str(exc))
    return APIException(detail=str(exc))
