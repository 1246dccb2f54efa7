"""Request parsers of the sample project: malformed bodies answer 400, never 500."""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, Any

from rest_framework import parsers
from rest_framework.exceptions import ParseError


class JSONParser(parsers.JSONParser):
    """DRF's JSON parser, refusing JSON nested too deep to parse with a 400.

    Python's ``json`` module raises ``RecursionError`` (not ``ValueError``) for a body
    nested thousands of levels deep; DRF's parser only turns ``ValueError`` into a
    ``ParseError``, so without this the deep body would be a 500.
    """

    def parse(
        self,
        stream: IO[Any],
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - the document is nested too deeply.") from None
