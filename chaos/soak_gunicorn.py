"""Gunicorn configuration of the soak's workers (``GUNICORN_CMD_ARGS="--config
python:chaos.soak_gunicorn"``): each worker times its keep-alive renewals.

A renewal falls due every third of the lease (:mod:`idempotency.core.keepalive`); how late it
ends past that moment is what decides whether the lease outlives it. Each worker appends
one line per renewal, ``<late at start> <late at end> <lease> <outcome>`` (seconds;
``renewed``, ``failed``: the store did not answer, or ``lost``: refused), to
``$SOAK_RENEWALS.<pid>``. Measurement only: the renewal itself is unchanged.
"""

from __future__ import annotations

import os
import time
from typing import Any


def post_fork(server: Any, worker: Any) -> None:
    from idempotency.core.keepalive import KeepAlive

    path = f"{os.environ['SOAK_RENEWALS']}.{os.getpid()}"
    renew = KeepAlive.renew

    def timed(self: KeepAlive, due: float) -> float | None:
        started, renewed, failed = time.monotonic(), self.renewals, self.failures
        try:
            return renew(self, due)
        finally:
            ended = time.monotonic()
            outcome = (
                "renewed" if self.renewals > renewed else "failed" if self.failures > failed
                else "lost"
            )  # fmt: skip
            with open(path, "a") as out:
                out.write(f"{started - due:.4f} {ended - due:.4f} {self.lease} {outcome}\n")

    KeepAlive.renew = timed  # type: ignore[method-assign]
