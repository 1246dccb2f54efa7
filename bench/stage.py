"""What the stages over HTTP share: the options, the variants and their running servers,
the users who call them, and the results each stage adds to."""

from __future__ import annotations

from dataclasses import dataclass

from bench.data import Users
from bench.options import Options
from bench.results import Results
from bench.servers import Server
from bench.variants import Variant


@dataclass(frozen=True)
class Stage:
    options: Options
    variants: list[Variant]
    #: variant name -> its running server
    servers: dict[str, Server]
    users: Users
    results: Results
