#!/usr/bin/env python3
"""The project's two commands, with nothing but Python 3.11+ on the machine.

    python3 dev.py run [ADDR:PORT]   # virtualenv, install, migrate, seed the demo, serve
                                     # (default 127.0.0.1:8000; or a bare PORT)
    python3 dev.py test [--all] [PYTEST ARGS]  # the test suite (arguments go to pytest);
                                     # --all adds the slow tiers (servers, browsers, ...)

Also: ``docs`` (build the documentation site into docs/_build/html, warnings as
errors; ``docs --serve [[ADDR:]PORT]`` also serves it, by default on 127.0.0.1:8001,
or a free port when that one is taken), ``demo`` (the double-charge story, live:
``manage.py retry_storm``), ``schemathesis`` (every schemathesis check against the
sample's own OpenAPI schema and server, ``--max-time`` seconds; CI runs it), ``lint``
(ruff check + ruff format --check, pinned; what CI runs), ``typecheck``, ``bench``,
``bench-smoke``, ``chaos`` and ``chaos-smoke`` (the sample under faults), ``soak``
(``--minutes N`` of load under scheduled faults, with a report), ``model`` (the
protocol's Promela model checked by SPIN: ``python3 -m model.check``); ``--help``
prints this. The virtualenv lives in ``.venv`` and is (re)installed whenever
``pyproject.toml`` changes.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = Path(os.environ.get("VENV", ROOT / ".venv"))
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PYTHON = BIN / "python"
STAMP = VENV / ".installed"


def sh(*args: str | Path) -> None:
    print("+", " ".join(str(a) for a in args), flush=True)
    completed = subprocess.run([str(a) for a in args], cwd=ROOT)
    if completed.returncode:
        sys.exit(completed.returncode)


def install(extras: str = "dev") -> None:
    if sys.version_info < (3, 11):  # noqa: UP036 - users may run an older python3
        sys.exit("Python 3.11+ is required")
    wanted = hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + extras.encode()).hexdigest()
    if STAMP.exists() and wanted in STAMP.read_text().split():
        return
    if not PYTHON.exists():
        sh(sys.executable, "-m", "venv", VENV)
    sh(PYTHON, "-m", "pip", "install", "--quiet", "--upgrade", "pip")
    sh(PYTHON, "-m", "pip", "install", "--quiet", "-e", f".[{extras}]")
    done = STAMP.read_text().split() if STAMP.exists() else []
    STAMP.write_text("\n".join([*done, wanted]) + "\n")


def run_address(rest: list[str]) -> tuple[str, list[str]]:
    """``run``'s address (``[ADDR:]PORT`` first, else ``$HOST``, else 127.0.0.1:8000)
    and the arguments left for ``runserver``."""
    if rest and not rest[0].startswith("-"):
        return rest[0], rest[1:]
    return os.environ.get("HOST", "127.0.0.1:8000"), rest


def run_links(address: str) -> str:
    """What ``run`` prints before serving: the shop's checkout and the API docs."""
    host, _, port = address.rpartition(":") if ":" in address else ("", "", address)
    if host in ("", "0.0.0.0", "[::]", "::"):
        host = "127.0.0.1"
    base = f"http://{host}:{port}"
    return (
        f"\n  The shop (checkout): {base}/shop/  log in as alice or bob, password "
        f"demo-password\n  The API docs:        {base}/api/docs/\n"
    )


def docs(rest: list[str]) -> None:
    """Build the docs site (Sphinx, warnings as errors, nitpicky); ``--serve`` serves it."""
    install("dev,docs")
    out = ROOT / "docs" / "_build" / "html"
    sh(BIN / "sphinx-build", "-W", "--keep-going", "-n", "-q", "-E", "-b", "html", "docs", out)
    if "--serve" not in rest:
        print(f"built: {out / 'index.html'}")
        return
    after = rest[rest.index("--serve") + 1 :]
    address = after[0] if after and not after[0].startswith("-") else "127.0.0.1:8001"
    host, _, port = address.rpartition(":")
    serve(out, host or "127.0.0.1", int(port))


def serve(directory: Path, host: str, port: int) -> None:
    import functools
    import http.server

    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(directory))
    try:
        server = http.server.ThreadingHTTPServer((host, port), handler)
    except OSError:  # taken: let the OS choose a free port
        server = http.server.ThreadingHTTPServer((host, 0), handler)
    print(f"serving the docs on http://{host}:{server.server_address[1]}/ (Ctrl-C stops)")
    with server, contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()


def main(argv: list[str]) -> None:
    command, rest = (argv[0], argv[1:]) if argv else ("", [])
    if command in ("-h", "--help", "help"):
        print(__doc__)
        return
    if command == "run":
        address, rest = run_address(rest)
        install()
        sh(PYTHON, "manage.py", "migrate", "--noinput")
        sh(PYTHON, "manage.py", "seed_demo")
        print(run_links(address), flush=True)
        sh(PYTHON, "manage.py", "runserver", address, *rest)
    elif command == "test":
        install()
        if "--all" in rest:  # the slow tiers too (tests/conftest.py), as CI runs them
            rest.remove("--all")
            os.environ["IDEMPOTENCY_TEST_ALL"] = "1"
        sh(PYTHON, "-m", "pytest", *rest)
    elif command == "docs":
        docs(rest)
    elif command == "schemathesis":
        install()
        sh(PYTHON, "-m", "tests.schemathesis_run", *rest)
    elif command == "demo":
        install()
        sh(PYTHON, "manage.py", "migrate", "--noinput", "-v0")
        sh(PYTHON, "manage.py", "retry_storm", *rest)
    elif command == "lint":
        install()
        sh(BIN / "ruff", "check", ".")
        sh(BIN / "ruff", "format", "--check", ".")
    elif command == "typecheck":
        install()
        sh(BIN / "mypy", "idempotency", "accounts", "orders", "payments", "config", "chaos")
    elif command in ("chaos", "chaos-smoke"):
        install()
        sh(PYTHON, "-m", "chaos", *(["--smoke"] if command == "chaos-smoke" else []), *rest)
    elif command == "soak":  # minutes of load under scheduled faults, with a report
        install()
        sh(PYTHON, "-m", "chaos.soak", *rest)
    elif command == "model":  # the protocol's Promela model, checked by SPIN
        sh(sys.executable, "-m", "model.check", *rest)
    elif command in ("bench", "bench-smoke"):
        install("dev,bench")
        sh(PYTHON, "-m", "bench", *(["--smoke"] if command == "bench-smoke" else []), *rest)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
