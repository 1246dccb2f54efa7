"""Benchmarks of django-idempotency: ``python -m bench`` (see ``bench/RESULTS.md``).

Measures what the idempotency layer costs per request next to a bare endpoint, an
authenticated no-op and two peer libraries, on one machine in one interleaved run.
"""
