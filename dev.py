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
protocol's Promela model checked by SPIN: ``python3 -m model.check``), ``install``
(the virtualenv alone, then the versions it holds); ``--help`` prints this. The
virtualenv lives in ``.venv`` and is (re)installed whenever ``pyproject.toml`` changes.

Another Python or Django, for any command (docs/development.md):

    python3 dev.py test --python 3.13                  # in .venv-3.13, that interpreter's
    python3 dev.py test --python 3.12 --constraints .ci/django-6.0.txt   # .venv-3.12-django-6.0

``--python X.Y`` (or ``$DEV_PYTHON``) takes pyenv's newest X.Y, else ``pythonX.Y`` on the
PATH, and fails when neither has it; ``--constraints FILE`` (or ``$DEV_CONSTRAINTS``) pins
what pip installs (``pip -c``), such as one Django or the oldest supported versions.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = Path(os.environ.get("VENV", ROOT / ".venv"))
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PYTHON = BIN / "python"
STAMP = VENV / ".installed"
# the interpreter that makes the virtualenv, and what pins its packages (``select``)
BASE_PYTHON = Path(sys.executable)
CONSTRAINTS: Path | None = None
SELECTED = False


def sh(*args: str | Path) -> None:
    print("+", " ".join(str(a) for a in args), flush=True)
    completed = subprocess.run([str(a) for a in args], cwd=ROOT)
    if completed.returncode:
        sys.exit(completed.returncode)


def version_of(executable: str | Path) -> str | None:
    """``X.Y.Z`` of a Python executable, or None when it does not run (a pyenv shim
    whose version is not selected exits non-zero)."""
    try:
        completed = subprocess.run(
            [str(executable), "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return completed.stdout.strip() if completed.returncode == 0 else None


def find_python(version: str) -> Path:
    """Python ``version`` (``3.13`` or ``3.13.0``): pyenv's newest matching one, else
    ``python3.13`` on the PATH. Exits non-zero, saying where it looked, when none runs."""
    if not re.fullmatch(r"3\.\d+(\.\d+)?", version):
        sys.exit(f"--python wants a version such as 3.13, not {version!r}")
    minor = ".".join(version.split(".")[:2])
    candidates: list[Path] = []
    pyenv = shutil.which("pyenv")
    if pyenv:
        listed = subprocess.run([pyenv, "versions", "--bare"], capture_output=True, text=True)
        matching = [
            v
            for v in listed.stdout.split()
            if re.fullmatch(r"\d+\.\d+\.\d+", v) and (v == version or v.startswith(version + "."))
        ]
        for v in sorted(matching, key=lambda v: [int(part) for part in v.split(".")], reverse=True):
            prefix = subprocess.run([pyenv, "prefix", v], capture_output=True, text=True)
            if prefix.returncode == 0:
                candidates.append(Path(prefix.stdout.strip()) / "bin" / f"python{minor}")
    on_path = shutil.which(f"python{minor}")
    if on_path:
        candidates.append(Path(on_path))
    for candidate in candidates:
        found = version_of(candidate)
        if found and (found == version or found.startswith(version + ".")):
            return candidate
    sys.exit(
        f"Python {version} not found: pyenv has no {version}.x"
        f"{'' if pyenv else ' (pyenv is not installed)'} and no working python{minor} is on "
        f"the PATH. Install it (e.g. pyenv install {minor}) or leave out --python."
    )


def select(python: str | None, constraints: str | None) -> None:
    """Use Python ``python`` (a version) and/or pin the packages to ``constraints`` (a
    pip constraints file): the virtualenv becomes ``.venv-<version>[-<file's stem>]``
    unless ``$VENV`` names one. Neither given: ``.venv`` with this interpreter."""
    global VENV, BIN, PYTHON, STAMP, BASE_PYTHON, CONSTRAINTS, SELECTED
    if python is None and constraints is None:
        return
    SELECTED = True
    if python is not None:
        BASE_PYTHON = find_python(python)
    if constraints is not None:
        CONSTRAINTS = (ROOT / constraints).resolve()
        if not CONSTRAINTS.is_file():
            sys.exit(f"--constraints: no such file {constraints}")
    if "VENV" not in os.environ:
        tag = python or f"{sys.version_info[0]}.{sys.version_info[1]}"
        VENV = ROOT / f".venv-{tag}{'-' + CONSTRAINTS.stem if CONSTRAINTS else ''}"
    BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
    PYTHON = BIN / "python"
    STAMP = VENV / ".installed"


def options(argv: list[str]) -> list[str]:
    """Takes ``--python X.Y`` and ``--constraints FILE`` (or ``$DEV_PYTHON``,
    ``$DEV_CONSTRAINTS``) out of ``argv``, selects them, and returns the rest."""
    found = {
        "--python": os.environ.get("DEV_PYTHON"),
        "--constraints": os.environ.get("DEV_CONSTRAINTS"),
    }
    rest: list[str] = []
    words = iter(argv)
    for word in words:
        name, equals, value = word.partition("=")
        if name in found:
            value = value if equals else next(words, "")
            if not value:
                sys.exit(f"{name} needs a value")
            found[name] = value
        else:
            rest.append(word)
    select(found["--python"] or None, found["--constraints"] or None)
    return rest


def install(*groups: str) -> None:
    """The package (editable) and the dependency groups ``groups`` (pyproject.toml's
    ``[dependency-groups]``, PEP 735; default ``dev``) into the virtualenv. pip reads
    groups from 25.1 on (``--group``): the virtualenv's pip is upgraded first."""
    if sys.version_info < (3, 11):  # noqa: UP036 - users may run an older python3
        sys.exit("Python 3.11+ is required")
    groups = groups or ("dev",)
    chosen = bytes(BASE_PYTHON) + (CONSTRAINTS.read_bytes() if CONSTRAINTS else b"")
    wanted = hashlib.sha256(
        (ROOT / "pyproject.toml").read_bytes()
        + ",".join(groups).encode()
        + (chosen if SELECTED else b"")
    ).hexdigest()
    if STAMP.exists() and wanted in STAMP.read_text().split():
        return
    if not PYTHON.exists():
        sh(BASE_PYTHON, "-m", "venv", VENV)
    if SELECTED and version_of(BASE_PYTHON) != version_of(PYTHON):
        sys.exit(f"{VENV} holds another Python than {BASE_PYTHON}: remove it, or set VENV")
    sh(PYTHON, "-m", "pip", "install", "--quiet", "--upgrade", "pip>=25.1")
    pin = ["-c", CONSTRAINTS] if CONSTRAINTS else []
    chosen_groups = [arg for group in groups for arg in ("--group", group)]
    sh(PYTHON, "-m", "pip", "install", "--quiet", "-e", ".", *chosen_groups, *pin)
    done = STAMP.read_text().split() if STAMP.exists() else []
    STAMP.write_text("\n".join([*done, wanted]) + "\n")


# what ``install`` reports: the interpreter and the packages the supported range names
REPORT_VERSIONS = """import sys
from importlib.metadata import PackageNotFoundError, version
def held(name):
    try:
        return f"{name} {version(name)}"
    except PackageNotFoundError:
        return f"no {name}"
names = ["Django", "djangorestframework", "django-redis", "celery", "psycopg", "redis"]
print(f"Python {sys.version.split()[0]}", *(held(n) for n in names), sep=", ")
"""


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
        f"  The admin:           {base}/admin/  user admin, password demo-password\n"
    )


def docs(rest: list[str]) -> None:
    """Build the docs site (Sphinx, warnings as errors, nitpicky); ``--serve`` serves it."""
    install()  # the dev group includes the docs group
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
    argv = options(argv)
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
    elif command == "install":  # the virtualenv alone (groups named: those), then what it holds
        install(*rest)
        sh(PYTHON, "-c", REPORT_VERSIONS)
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
        install("dev", "bench")
        sh(PYTHON, "-m", "bench", *(["--smoke"] if command == "bench-smoke" else []), *rest)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
