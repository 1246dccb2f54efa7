"""Every Python and shell snippet of the README and the docs runs (see ``snippets.py``).

One test per page runs its snippets in order; a snippet marked ``skip`` is reported
as a skipped test of its own, with its reason, never as a pass.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import django
import pytest
from django.core import checks
from django.test import override_settings

from tests.docs.snippets import (
    ROOT,
    Page,
    Snippet,
    free_port,
    pages,
    run_group,
    run_shell,
    shell_env,
    with_port,
)

PAGES = pages()
SKIPPED = [s for page in PAGES for s in page.snippets if s.skip_reason]
SERVER_START_SECONDS = 180.0


class Servers:
    """The servers a page's ``server`` snippets started, stopped when the page ends."""

    def __init__(self) -> None:
        self.port: int | None = None
        self.processes: list[subprocess.Popen[str]] = []

    def start(self, snippet: Snippet, *, cwd: Path, env: dict[str, str], log: Path) -> None:
        self.port = port = free_port()
        output = log.open("w")
        process = subprocess.Popen(
            ["bash", "-e", "-c", with_port(snippet.code, port)],
            cwd=cwd,
            env={**env, "HOST": f"127.0.0.1:{port}"},
            stdout=output,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.processes.append(process)
        deadline = time.monotonic() + SERVER_START_SECONDS
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise AssertionError(f"{snippet.name}: the server exited:\n{log.read_text()}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                return
            time.sleep(0.2)  # real time: waiting for a real server to listen
        raise AssertionError(f"{snippet.name}: no server on {port}:\n{log.read_text()}")

    def stop(self) -> None:
        for process in self.processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=15)


@pytest.fixture
def servers() -> Iterator[Servers]:
    started = Servers()
    try:
        yield started
    finally:
        started.stop()


def _failed(snippet: Snippet, completed: subprocess.CompletedProcess[str]) -> str:
    return (
        f"{snippet.name} ended with {completed.returncode} "
        f"(expected {snippet.expected_exit}):\n--- stdout\n{completed.stdout[-4000:]}"
        f"\n--- stderr\n{completed.stderr[-4000:]}"
    )


def _check_settings(namespace: dict[str, Any], snippet: Snippet) -> None:
    """An ``IDEMPOTENCY`` dict a snippet wrote passes the system checks (errors only)."""
    overrides = {"IDEMPOTENCY": namespace["IDEMPOTENCY"]}
    if isinstance(namespace.get("CACHES"), dict):
        overrides["CACHES"] = namespace["CACHES"]
    with override_settings(**overrides):
        from idempotency.checks import check_settings

        errors = [m for m in check_settings() if m.level >= checks.ERROR]
    assert not errors, f"{snippet.name}: IDEMPOTENCY fails the checks: {errors}"


def run_namespace_page(page: Page, tmp_path: Path, servers: Servers) -> None:
    namespace: dict[str, Any] = {"__name__": f"docs_snippet_{tmp_path.name}"}
    env = shell_env({"DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}"})
    migrated = False
    for snippet in page.snippets:
        if snippet.skip_reason:
            continue
        if snippet.is_python:
            before = namespace.get("IDEMPOTENCY")
            code = compile(with_port(snippet.code, servers.port), snippet.name, "exec")
            with contextlib.redirect_stdout(io.StringIO()):
                exec(code, namespace)
            if namespace.get("IDEMPOTENCY") is not before:
                _check_settings(namespace, snippet)
            continue
        if not migrated:
            completed = run_shell("python manage.py migrate --noinput -v0", cwd=ROOT, env=env)
            assert completed.returncode == 0, completed.stderr
            migrated = True
        if snippet.mark == "server":
            servers.start(snippet, cwd=ROOT, env=env, log=tmp_path / "server.log")
            continue
        completed = run_shell(with_port(snippet.code, servers.port), cwd=ROOT, env=env)
        assert completed.returncode == snippet.expected_exit, _failed(snippet, completed)


def run_project_page(page: Page, tmp_path: Path, servers: Servers) -> None:
    project = tmp_path / "project"
    project.mkdir()
    env = shell_env()
    for snippet in page.snippets:
        if snippet.skip_reason:
            continue
        code = with_port(snippet.code, servers.port)
        if snippet.is_python and snippet.caption == "python manage.py shell":
            completed = run_group(
                ["python", "manage.py", "shell"], cwd=project, env=env, timeout=240, stdin=code
            )
            assert completed.returncode == 0, _failed(snippet, completed)
        elif snippet.is_python:
            assert snippet.caption, f"{snippet.name}: a project page's Python names its file"
            name, append = (
                snippet.caption.removesuffix("(append)").strip(),
                "(append)" in (snippet.caption),
            )
            target = project / name
            target.parent.mkdir(parents=True, exist_ok=True)
            with target.open("a" if append else "w") as file:
                file.write(("\n" if append else "") + code)
        elif snippet.mark == "server":
            servers.start(snippet, cwd=project, env=env, log=tmp_path / "server.log")
        else:
            completed = run_shell(code, cwd=project, env=env)
            assert completed.returncode == snippet.expected_exit, _failed(snippet, completed)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("doc", PAGES, ids=[doc.name for doc in PAGES])
def test_snippets_run(doc: Page, tmp_path: Path, servers: Servers) -> None:
    # "doc", not "page": pytest-playwright parametrises any test that asks for a "page"
    if django.VERSION < (6, 0) and any("django.tasks" in s.code for s in doc.snippets):
        # the page is about Django 6's own tasks; the 6.0 and 6.1 tiers run it
        pytest.skip(f"{doc.name} needs django.tasks (Django 6.0+), this is {django.get_version()}")
    if doc.project:
        run_project_page(doc, tmp_path, servers)
    else:
        run_namespace_page(doc, tmp_path, servers)


@pytest.mark.parametrize("snippet", SKIPPED, ids=[s.name for s in SKIPPED])
def test_skipped_snippet(snippet: Snippet) -> None:
    pytest.skip(f"{snippet.name} not run: {snippet.skip_reason}")


def test_every_page_with_code_is_collected() -> None:
    """The collector finds the pages' blocks (a parser that found none would pass)."""
    names = {page.name for page in PAGES}
    assert {"README.md", "docs/tutorial.md", "docs/howto/views.md"} <= names
    assert sum(len(page.snippets) for page in PAGES) > 40
