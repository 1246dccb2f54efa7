"""Stopping the processes tests start (servers, workers), each in its own session."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import Any


def stop_group(process: subprocess.Popen[Any], *, timeout: float = 15) -> None:
    """SIGTERM the process's group (started with ``start_new_session=True``), SIGKILL it
    if it is still there after ``timeout`` seconds."""
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)


class WorkerProcess:
    """What a worker subprocess of a test (started with ``start_new_session=True``, its
    output in ``log``) can be asked: its pid, its output, a kill or a stop."""

    process: subprocess.Popen[bytes] | None
    log: Path

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def kill(self) -> None:
        """SIGKILL: no shutdown, no acknowledgement, no cleanup."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> None:
        if self.process is not None:
            stop_group(self.process, timeout=10)

    def output(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-6000:]
        except OSError:
            return ""
