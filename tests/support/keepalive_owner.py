"""A process that owns a key and runs a long body, to be SIGKILLed by a keep-alive test.

``python -m tests.support.keepalive_owner <db|redis> <ref> <marker file>``: claims
``owned:<ref>`` through :data:`BODIES` (lease :data:`LEASE`), writes the marker once
the body runs, then sleeps until killed. The test calls the same function (same module,
same qualified name, same fingerprint) to see when the key is taken over.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import django

#: The lease of the owned key: the keep-alive renews it every third of it, so a renewal
#: may run four seconds late before the lease runs out (2 s let one run 1.33 s late, less
#: than an owner process on a loaded CI machine can stall).
LEASE = 6.0

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    django.setup()

from idempotency import idempotent_function  # noqa: E402
from tests.support.stores import DB_STORE, REDIS_STORE, store_of  # noqa: E402

MARKER = {"path": ""}


def _body(ref: str, seconds: float) -> dict[str, str]:
    if MARKER["path"]:
        Path(MARKER["path"]).write_text(str(os.getpid()))
    time.sleep(seconds)  # real time: a long body, outliving leases the store's server times
    return {"ran_in": str(os.getpid())}


BODIES = {
    name: idempotent_function(
        key="owned:{ref}", store=store, lease=LEASE, wait=0, fingerprint=["ref"], mode="lease"
    )(_body)
    for name, store in (
        ("db", store_of(DB_STORE)),
        ("redis", store_of(REDIS_STORE)),
    )
}


if __name__ == "__main__":
    # through the module's own name, so the function's qualified name (its fingerprint)
    # is the one the test process computes
    from tests.support import keepalive_owner

    keepalive_owner.MARKER["path"] = sys.argv[3]
    keepalive_owner.BODIES[sys.argv[1]](sys.argv[2], 600.0)
