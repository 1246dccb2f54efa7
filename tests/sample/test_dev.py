"""The newcomer's entry points: ``dev.py`` and the files a fresh clone needs."""

from __future__ import annotations

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
