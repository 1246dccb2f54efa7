"""The engine every interface shares: one keyed run (:mod:`~idempotency.core.job`), the
engine that runs it in direct calls of the store's methods, lease and atomic mode, sync
and async (:mod:`~idempotency.core.engine`), and the lease it keeps alive while the work
runs (:mod:`~idempotency.core.keepalive`). What it stands on is in :mod:`idempotency.utils`."""
