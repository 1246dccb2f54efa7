"""Multipart bodies of any size, written to a file, for the upload tests."""

from __future__ import annotations

from pathlib import Path

MB = 1024 * 1024
BOUNDARY = "----idempotency-upload-boundary"


def write_body(path: Path, size: int, fill: bytes = b"u") -> int:
    """A multipart body with one ``doc`` file of ``size`` bytes and a ``note`` field."""
    head = (
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="note"\r\n\r\nhello\r\n'
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="doc"; filename="d.bin"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode()
    tail = f"\r\n--{BOUNDARY}--\r\n".encode()
    chunk = fill * MB
    with path.open("wb") as out:
        out.write(head)
        for start in range(0, size, MB):
            out.write(chunk[: min(MB, size - start)])
        out.write(tail)
    return path.stat().st_size
