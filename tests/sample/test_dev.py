"""The newcomer's entry points: ``dev.py`` and the files a fresh clone needs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import dev

ROOT = Path(__file__).resolve().parents[2]


def test_help_exits_zero_and_lists_the_commands() -> None:
    completed = subprocess.run(
        [sys.executable, "dev.py", "--help"], cwd=ROOT, capture_output=True, text=True
    )
    assert completed.returncode == 0, completed.stderr
    for command in ("run [ADDR:PORT]", "test", "lint", "typecheck"):
        assert command in completed.stdout


def test_an_unknown_command_fails() -> None:
    completed = subprocess.run(
        [sys.executable, "dev.py", "no-such-command"], cwd=ROOT, capture_output=True, text=True
    )
    assert completed.returncode != 0


@pytest.mark.parametrize(
    ("rest", "expected"),
    [
        (["8766"], ("8766", [])),
        (["0.0.0.0:8766", "--noreload"], ("0.0.0.0:8766", ["--noreload"])),
        (["--noreload"], ("127.0.0.1:8000", ["--noreload"])),
        ([], ("127.0.0.1:8000", [])),
    ],
)
def test_run_takes_an_address(
    rest: list[str], expected: tuple[str, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HOST", raising=False)
    assert dev.run_address(rest) == expected


@pytest.mark.parametrize(
    ("address", "shop"),
    [
        ("127.0.0.1:8000", "http://127.0.0.1:8000/shop/"),
        ("8766", "http://127.0.0.1:8766/shop/"),
        ("0.0.0.0:9000", "http://127.0.0.1:9000/shop/"),
        ("localhost:8001", "http://localhost:8001/shop/"),
    ],
)
def test_run_prints_the_shops_link(address: str, shop: str) -> None:
    links = dev.run_links(address)
    assert f"The shop (checkout): {shop} " in links
    assert "alice" in links and "demo-password" in links
    assert shop.replace("/shop/", "/api/docs/") in links
    assert f"{shop.replace('/shop/', '/admin/')}  user admin, password demo-password" in links


def test_the_quick_tier_says_in_one_line_what_it_skipped_for_want_of_a_service() -> None:
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in ("DATABASE_URL", "REDIS_URL", "IDEMPOTENCY_TEST_REQUIRE_SERVICES")
    }
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/utils/test_redis_clients.py",
            "-k",
            "from_a_url",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    last = completed.stdout.strip().splitlines()[-2:]
    skipped = last[-1].split(" skipped")[0].split()[-1]  # "11 skipped in 0.25s"
    assert int(skipped) > 0, completed.stdout
    assert last[0].startswith(f"{skipped} tests were skipped for want of a service or tool"), last
    assert "needs Redis" in last[0] and "REDIS_URL" in last[0]
    # counted, not listed: no "SKIPPED [1] ..." line per skipped test before the totals
    assert "SKIPPED" not in completed.stdout, completed.stdout


# -- another Python or Django: --python and --constraints -------------------------------


@pytest.fixture
def selection(monkeypatch: pytest.MonkeyPatch) -> None:
    """Puts back what ``dev.select`` changes, and clears the environment it reads."""
    for name in ("VENV", "BIN", "PYTHON", "STAMP", "BASE_PYTHON", "CONSTRAINTS", "SELECTED"):
        monkeypatch.setattr(dev, name, getattr(dev, name))
    for variable in ("VENV", "DEV_PYTHON", "DEV_CONSTRAINTS"):
        monkeypatch.delenv(variable, raising=False)


@pytest.mark.usefixtures("selection")
def test_python_and_constraints_choose_the_interpreter_and_the_virtualenv() -> None:
    minor = f"{sys.version_info[0]}.{sys.version_info[1]}"
    rest = dev.options(["test", "--python", minor, "--constraints=.ci/django-6.0.txt", "-k", "x"])
    assert rest == ["test", "-k", "x"]
    assert (dev.VENV.parent, dev.VENV.name) == (ROOT, f".venv-{minor}-django-6.0")
    assert dev.PYTHON == dev.VENV / "bin" / "python"
    assert dev.CONSTRAINTS == ROOT / ".ci" / "django-6.0.txt"
    assert (dev.version_of(dev.BASE_PYTHON) or "").startswith(f"{minor}.")


@pytest.mark.usefixtures("selection")
def test_the_environment_chooses_too_and_neither_keeps_dot_venv(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert dev.options(["test"]) == ["test"]
    assert dev.VENV == ROOT / ".venv" and dev.CONSTRAINTS is None and not dev.SELECTED
    monkeypatch.setenv("DEV_CONSTRAINTS", ".ci/oldest.txt")
    dev.options(["test"])
    assert dev.VENV.name == f".venv-{sys.version_info[0]}.{sys.version_info[1]}-oldest"


def test_a_missing_python_fails_clearly_and_makes_nothing() -> None:
    completed = subprocess.run(
        [sys.executable, "dev.py", "test", "--python", "3.99"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert completed.returncode != 0
    assert "Python 3.99 not found" in completed.stderr and "pyenv" in completed.stderr
    assert not (ROOT / ".venv-3.99").exists()


@pytest.mark.parametrize(
    "argv", [["test", "--python", "three"], ["test", "--python"], ["test", "--constraints", "x"]]
)
def test_a_bad_option_fails(argv: list[str]) -> None:
    completed = subprocess.run(
        [sys.executable, "dev.py", *argv], cwd=ROOT, capture_output=True, text=True
    )
    assert completed.returncode != 0 and completed.stderr.strip()
