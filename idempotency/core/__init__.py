"""The engine every interface shares: one keyed run (:mod:`~idempotency.core.job`), its
flows (:mod:`~idempotency.core.lease`, :mod:`~idempotency.core.atomic`, with the steps
they share in :mod:`~idempotency.core.steps`) and the drivers that carry them out, sync
and async (:mod:`~idempotency.core.engine`)."""
