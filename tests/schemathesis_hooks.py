"""schemathesis hooks (``SCHEMATHESIS_HOOKS=tests.schemathesis_hooks``): one fresh
Idempotency-Key per generated case, so a 422 is only ever a real mismatch.

A key the schema accepts is replaced with a new UUID; a key the case made invalid on
purpose (a negative case) is left as it is, so the server's refusal is still tested.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

import schemathesis

from idempotency.contrib.openapi.spectacular import KEY_PATTERNS

HEADER = "Idempotency-Key"
_VALID = re.compile(KEY_PATTERNS["lenient"])


@schemathesis.hook
def before_call(context: Any, case: Any, kwargs: Any) -> None:
    headers = case.headers or {}
    for name in list(headers):
        if name.lower() == HEADER.lower() and _VALID.fullmatch(str(headers[name])):
            headers[name] = uuid.uuid4().hex
