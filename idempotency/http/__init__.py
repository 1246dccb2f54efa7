"""The HTTP interfaces: ``@idempotent``, ``IdempotentMixin``, ``IdempotencyMiddleware``.

They share one request flow (:mod:`idempotency.http.handling`) over the store contract;
keys, fingerprints, stored responses and per-view policies live beside it. This package
imports nothing itself, so ``idempotency.http.responses`` can be used by the stores
without pulling in the views.
"""
