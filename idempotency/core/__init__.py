"""The engine every interface shares: one keyed run (:mod:`~idempotency.core.job`) and
the engine that runs it in direct calls of the store's methods, lease and atomic mode,
sync and async (:mod:`~idempotency.core.engine`); what it stands on (keep-alive,
backoff, outages, hashing, canonical JSON, plugin loading)."""
