"""Count executions of view bodies where no rollback can undo them: an O_APPEND file.

A storm test that counts committed rows cannot see a view body that ran five
times and rolled four back (its gateway call or email happened five times).
Each execution appends one line (its label, usually the Idempotency-Key) to
the file named by ``IDEMPOTENCY_TEST_EXECUTIONS``; threads and processes
(gunicorn workers) share it, and ``O_APPEND`` writes of one short line never
interleave.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

ENV = "IDEMPOTENCY_TEST_EXECUTIONS"


def record_execution(label: str) -> None:
    path = os.environ.get(ENV)
    if not path:
        return
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{label}\n".encode())
    finally:
        os.close(fd)


def executions(path: Path) -> Counter[str]:
    """How many times each label ran, as recorded in ``path``."""
    if not path.exists():
        return Counter()
    return Counter(line for line in path.read_text().splitlines() if line)
