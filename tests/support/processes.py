"""Stopping the processes tests start (servers, workers), each in its own session."""

from __future__ import annotations

import os
import signal
import subprocess
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
