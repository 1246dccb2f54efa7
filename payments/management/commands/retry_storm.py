"""``manage.py retry_storm``: the double-charge story, live (see :mod:`payments.storm`)."""

from __future__ import annotations

import json
import sys
import time
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection

from payments.storm import StormConfig, run_storm
from payments.storm_report import summary, table, verdict

BAR = 30


def _positive_int(value: str) -> int:
    number = int(value)
    if number < 1:
        raise ValueError(value)
    return number


class Command(BaseCommand):
    help = (
        "Start the sample server and pay orders through a retrying client (timeouts, "
        "retries, concurrent duplicates): once through a naive pay endpoint (read, then "
        "save(), no key), once through the protected one. Prints what the client did and "
        "what the database holds. DEMO ONLY: it creates storm-* users on this database."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--payments", type=_positive_int, default=20)
        parser.add_argument(
            "--duplicates",
            type=_positive_int,
            default=3,
            help="concurrent copies of each payment (double clicks, proxies)",
        )
        parser.add_argument("--amount", default="25.00")
        parser.add_argument(
            "--timeout",
            type=float,
            default=0.25,
            help="seconds the client waits for an answer before retrying",
        )
        parser.add_argument(
            "--delay",
            type=float,
            default=0.4,
            help="longest random delay the server's network adds to an answer",
        )
        parser.add_argument("--attempts", type=_positive_int, default=8)
        parser.add_argument(
            "--settle-timeout",
            type=float,
            default=30.0,
            help="seconds the last attempt of a payment waits for its answer",
        )
        parser.add_argument("--json", type=Path, help="also write the numbers to this file")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            amount = Decimal(options["amount"])
        except InvalidOperation as exc:
            raise CommandError(f"--amount {options['amount']!r} is not a decimal") from exc
        if amount <= 0 or options["timeout"] <= 0 or options["delay"] < 0:
            raise CommandError("--amount and --timeout must be positive, --delay not negative")
        if options["settle_timeout"] <= 0:
            raise CommandError("--settle-timeout must be positive")
        config = StormConfig(
            payments=options["payments"],
            duplicates=options["duplicates"],
            amount=amount,
            timeout=options["timeout"],
            attempts=options["attempts"],
            delay=options["delay"],
            settle_timeout=options["settle_timeout"],
        )
        engine = "PostgreSQL" if connection.vendor == "postgresql" else connection.vendor
        self.stdout.write(
            f"retry_storm: {config.payments} payments x {config.duplicates} concurrent copies "
            f"per endpoint, client timeout at least {config.timeout:g} s (raised to fit this "
            f"machine; a last attempt waits up to {config.settle_timeout:g} s), network "
            f"delay up to {config.delay:g} s, on {engine} ({connection.settings_dict['NAME']})"
        )
        started = time.monotonic()
        try:
            sides = run_storm(config, progress=self._progress)
        except RuntimeError as exc:
            raise CommandError(str(exc)) from exc
        if sys.stderr.isatty():
            sys.stderr.write("\n")
        self.stdout.write("")
        for line in table(sides):
            self.stdout.write(line)
        self.stdout.write("")
        for line in verdict(sides, config.amount):
            self.stdout.write(line)
        self.stdout.write(summary(sides, time.monotonic() - started))
        if options["json"]:
            numbers = {name: side.as_dict() for name, side in sides.items()}
            options["json"].write_text(json.dumps(numbers, indent=2))

    def _progress(self, done: int, total: int, requests: int) -> None:
        if not sys.stderr.isatty():
            return
        filled = BAR * done // max(total, 1)
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (BAR - filled)}] {done}/{total} clients")
        sys.stderr.flush()
