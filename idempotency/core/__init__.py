"""The engine every interface shares: one keyed run (:mod:`~idempotency.core.job`), its
entry points (:mod:`~idempotency.core.engine`), its two modes (:mod:`~idempotency.core.lease`,
:mod:`~idempotency.core.atomic`) and the steps they share (:mod:`~idempotency.core.steps`),
each a direct call of the store's typed method."""
