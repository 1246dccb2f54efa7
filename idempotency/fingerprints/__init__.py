"""Compatibility path: fingerprints live in :mod:`idempotency.http.fingerprints`.

``FINGERPRINT = "idempotency.fingerprints.request_fingerprint"`` keeps working. (A
package rather than ``fingerprints.py``, so that git still follows the module's move.)
"""

from idempotency.http.fingerprints import request_fingerprint

__all__ = ["request_fingerprint"]
