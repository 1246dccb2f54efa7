"""Stores keep idempotency records: the contract and the configured stores by alias
(:mod:`~idempotency.stores.base`), one module per store (:mod:`~idempotency.stores.database`,
:mod:`~idempotency.stores.redis`, :mod:`~idempotency.stores.cache`), and what they share."""
