"""The HTTP interfaces: ``@idempotent``, ``IdempotentMixin``, ``IdempotencyMiddleware``.

They share one request flow (:mod:`idempotency.http.handler`) over the store contract;
keys, fingerprints, stored responses and per-view policies live beside it. The package
itself imports nothing, so importing one of its modules does not load the others.
"""
