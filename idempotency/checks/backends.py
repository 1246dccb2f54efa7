"""The pluggable backends of submit tokens and locks: each setting names a usable one
(E044 cannot be imported, E045 no subclass of its base class, E046 abstract)."""

from __future__ import annotations

from typing import Any

from django.core import checks


def check_backends(values: dict[str, Any]) -> list[checks.CheckMessage]:
    """E044, E045 and E046: ``SUBMIT_TOKEN_BACKEND`` or ``LOCK_BACKEND`` names no usable
    backend."""
    from idempotency.locks.locking import LOCK_BACKENDS
    from idempotency.tokens.api import TOKEN_BACKENDS

    errors: list[checks.CheckMessage] = []
    for pluggable in (TOKEN_BACKENDS, LOCK_BACKENDS):
        problem = pluggable.problem(values[pluggable.setting])
        if problem is not None:
            errors.append(
                checks.Error(problem.text, hint=problem.hint, id=f"idempotency.{problem.code}")
            )
    return errors
