"""What reading a record through the replay allow-list costs:
``python -m bench.replay_checks [--rev REV]``.

Counts the instructions of one ``idempotency.http.responses.replay()`` (a stored 201
with ``Content-Type`` and ``Location``, the Django response it builds included) as
checked out, and as it was at ``REV`` (default: the commit before the checks), each
under ``valgrind --tool=callgrind`` with ``FEW`` and ``MANY`` calls after a warm-up: the
difference over ``MANY - FEW`` is one call, start-up and warm-up cancelled out.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

FEW, MANY = 1000, 3000
ROOT = Path(__file__).resolve().parent.parent


def run(source: str, count: int) -> None:
    """``count`` replays with the ``replay`` of the module at ``source``."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    import django

    django.setup()
    from idempotency.stores.base import StoredResponse

    spec = importlib.util.spec_from_file_location("measured_responses", source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    stored = StoredResponse(
        201, [("Content-Type", "application/json"), ("Location", "/orders/1")], b'{"id": 1}'
    )
    for _ in range(200 + count):
        module.replay(stored)


def instructions(source: str, count: int) -> int:
    with tempfile.NamedTemporaryFile(suffix=".out") as out:
        subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={out.name}",
                sys.executable,
                "-m",
                "bench.replay_checks",
                "--run",
                source,
                str(count),
            ],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        found = re.search(rb"^(?:summary|totals): (\d+)", Path(out.name).read_bytes(), re.M)
        assert found is not None
        return int(found.group(1))


def per_call(source: str) -> float:
    return (instructions(source, MANY) - instructions(source, FEW)) / (MANY - FEW)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.replay_checks", description=__doc__)
    parser.add_argument("--rev", default="31d5169^")
    parser.add_argument("--run", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run:
        run(args.run[0], int(args.run[1]))
        return 0
    old = subprocess.run(
        ["git", "show", f"{args.rev}:idempotency/http/responses.py"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout
    with tempfile.NamedTemporaryFile("wb", suffix=".py") as before:
        before.write(old)
        before.flush()
        then = per_call(before.name)
    now = per_call(str(ROOT / "idempotency" / "http" / "responses.py"))
    print(f"replay() at {args.rev}: {then:,.0f} instructions; checked out: {now:,.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
