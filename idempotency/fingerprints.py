"""Compatibility path: fingerprints live in :mod:`idempotency.http.fingerprints`.

``FINGERPRINT = "idempotency.fingerprints.request_fingerprint"`` keeps working.
"""

from idempotency.http.fingerprints import request_fingerprint

__all__ = ["request_fingerprint"]
