"""A stored response body as the admin shows it: pretty JSON, text, or a hex dump,
bounded in length."""

from __future__ import annotations

import contextlib
import json

from django.utils.translation import gettext, ngettext


def body_preview(body: bytes, *, limit: int = 4096, hex_bytes: int = 64) -> str:
    """A readable, bounded rendering of a stored response body (plain text, not escaped).

    JSON is pretty-printed, other UTF-8 text is shown as is, anything else as a
    byte count and a hex dump of its first ``hex_bytes`` bytes. Text longer than
    ``limit`` characters is cut with a note of the body's full size.
    """
    size = len(body)
    if not body:
        return gettext("(empty body)")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and not _is_text(text):
        text = None
    if text is None:
        head = body[:hex_bytes]
        lines = [
            f"{offset:08x}  {head[offset : offset + 16].hex(' ')}"
            for offset in range(0, len(head), 16)
        ]
        more = "\n…" if size > hex_bytes else ""
        label = ngettext("<%(n)d byte of binary data>", "<%(n)d bytes of binary data>", size)
        return label % {"n": size} + "\n" + "\n".join(lines) + more
    with contextlib.suppress(ValueError):
        text = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    if len(text) > limit:
        note = gettext("… (truncated, %(n)d bytes)") % {"n": size}
        text = text[:limit] + "\n" + note
    return text


def _is_text(text: str) -> bool:
    """Whether decoded UTF-8 is printable text rather than binary that happens to decode."""
    return all(char.isprintable() or char in "\t\n\r" for char in text[:4096])
