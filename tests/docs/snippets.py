"""The code blocks of the README and of the docs pages, and how each one runs.

Every fenced block whose language is Python (``python``, ``py``) or shell (``sh``,
``bash``, ``console``, ``shell``) is a snippet, also inside MyST ``{code-block}``
directives and list items. An HTML comment on the line before a block marks it:

- ``<!-- snippet: skip: <reason> -->``: not run; the reason is shown in the test report;
- ``<!-- snippet: server -->``: a shell block that starts a server: it runs in the
  background (``8000`` in it, and ``HOST``, point at a free port), the page's later
  blocks reach it on that port, and it is stopped when the page ends;
- ``<!-- snippet: exit=N -->``: a shell block expected to end with status ``N``.

A page is run in one of two modes:

- **namespace** (the default): Python blocks run in order in one namespace per page,
  inside the test settings; shell blocks run with ``bash -e`` in the repository;
- **project** (``<!-- snippets: project -->`` anywhere in the page, as in the
  tutorial): the page builds a project in an empty directory. A Python block with a
  ``:caption:`` naming a file is written to that file (``(append)`` after the name
  appends to it); one captioned ``python manage.py shell`` is piped into that command;
  shell blocks run there.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
# the virtualenv running the tests (.venv, or .venv-3.13 and the like: dev.py --python)
VENV_BIN = Path(sys.executable).parent

PYTHON = {"python", "py", "python3"}
SHELL = {"sh", "bash", "console", "shell"}
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
MARK = re.compile(r"^\s*<!--\s*snippet:\s*(?P<mark>.*?)\s*-->\s*$")
PROJECT = re.compile(r"<!--\s*snippets:\s*project\s*-->")


@dataclass
class Snippet:
    path: Path
    line: int
    language: str
    code: str
    caption: str = ""
    mark: str = ""

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def is_python(self) -> bool:
        return self.language in PYTHON

    @property
    def skip_reason(self) -> str | None:
        if self.mark.startswith("skip"):
            return self.mark.partition(":")[2].strip() or "marked skip"
        return None

    @property
    def expected_exit(self) -> int:
        match = re.fullmatch(r"exit=(\d+)", self.mark)
        return int(match.group(1)) if match else 0


@dataclass
class Page:
    path: Path
    project: bool
    snippets: list[Snippet] = field(default_factory=list)

    @property
    def name(self) -> str:
        return str(self.path.relative_to(ROOT))


def _language(info: str) -> tuple[str, bool]:
    """The language of a fence's info string, and whether it opens a MyST directive."""
    info = info.strip()
    directive = re.match(r"^\{(code-block|code|sourcecode)\}\s*(\S*)", info)
    if directive:
        return directive.group(2).lower(), True
    return (info.split()[0].lower() if info else ""), False


def parse(path: Path) -> Page:
    """The page's snippets, in order."""
    text = path.read_text()
    lines = text.splitlines()
    page = Page(path=path, project=bool(PROJECT.search(text)))
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        indent, fence = opening.group("indent"), opening.group("fence")
        language, directive = _language(opening.group("info"))
        body: list[str] = []
        end = index + 1
        while end < len(lines):
            closing = FENCE.match(lines[end])
            if (
                closing
                and closing.group("fence").startswith(fence[0])
                and len(closing.group("fence")) >= len(fence)
                and not closing.group("info").strip()
                and len(closing.group("indent")) <= len(indent)
            ):
                break
            body.append(lines[end])
            end += 1
        code = textwrap.dedent("\n".join(body))
        caption = ""
        if directive:
            options = []
            rest = code.splitlines()
            while rest and rest[0].startswith(":"):
                options.append(rest.pop(0))
            for option in options:
                key, _, value = option[1:].partition(":")
                if key.strip() == "caption":
                    caption = value.strip()
            code = "\n".join(rest).strip("\n")
        previous = next((lines[i] for i in range(index - 1, -1, -1) if lines[i].strip()), "")
        mark = MARK.match(previous)
        if language in PYTHON | SHELL:
            page.snippets.append(
                Snippet(
                    path=path,
                    line=index + 1,
                    language=language,
                    code=code + "\n",
                    caption=caption,
                    mark=mark.group("mark") if mark else "",
                )
            )
        index = end + 1
    return page


def pages() -> list[Page]:
    """The README and every docs page that has snippets."""
    paths = [ROOT / "README.md"]
    paths += sorted(p for p in DOCS.rglob("*.md") if "_build" not in p.parts)
    return [page for page in map(parse, paths) if page.snippets]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def shell_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of shell snippets: the project's virtualenv first on the PATH,
    ``python`` being its interpreter, and none of the test run's own settings."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DJANGO_", "PYTEST_", "DATABASE_URL", "REDIS_URL", "CELERY_"))
    }
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(VENV_BIN.parent)
    env.update(extra or {})
    return env


def run_shell(
    code: str, *, cwd: Path, env: dict[str, str], timeout: float = 240.0, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    """Run ``code`` with ``bash -e -o pipefail`` in its own process group, which is
    killed whole (servers a snippet left behind included) when it overruns."""
    return run_group(
        ["bash", "-e", "-o", "pipefail", "-c", code], cwd=cwd, env=env, timeout=timeout, stdin=stdin
    )


def run_group(
    args: list[str], *, cwd: Path, env: dict[str, str], timeout: float, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    process = subprocess.Popen(
        args,
        cwd=cwd,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        stderr += f"\n[killed after {timeout:g} s]"
        return subprocess.CompletedProcess(args, -9, stdout, stderr)
    return subprocess.CompletedProcess(args, process.returncode, stdout, stderr)


def with_port(code: str, port: int | None) -> str:
    """``code`` with the documented port 8000 replaced by the server's free port."""
    return code if port is None else re.sub(r"(?<![0-9])8000(?![0-9])", str(port), code)
