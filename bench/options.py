"""The command line of ``python -m bench``: what a run measures, for how long, and where
its report goes."""

from __future__ import annotations

import argparse
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
DESCRIPTION = """\
The benchmark run: servers up, interleaved load rounds, storms, probes, growth, report.

``python -m bench`` (full run, writes ``bench/RESULTS.md``), ``python -m bench --smoke``
(seconds per variant, exits non-zero when anything breaks), ``--rounds N --duration S``.
"""


@dataclass
class Options:
    smoke: bool
    rounds: int
    duration: float
    storm_size: int
    storms_per_round: int
    growth_small: int
    growth_large: int
    growth_samples: int
    warmup: float
    cost_blocks: int
    peers: bool
    growth: bool
    variants: frozenset[str] | None
    output: Path | None
    command: str
    asgi: bool = False


def parse(argv: list[str] | None = None) -> Options:
    parser = argparse.ArgumentParser(prog="python -m bench", description=DESCRIPTION)
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="a seconds-long run of the same machinery; exit 1 on any failure",
    )
    parser.add_argument("--rounds", type=int, help="interleaved rounds (default 6; smoke 1)")
    parser.add_argument(
        "--duration",
        type=float,
        help="seconds per variant and path in each round (default 2; smoke 1)",
    )
    parser.add_argument(
        "--storm-size",
        type=int,
        default=50,
        help="concurrent requests with one key in a storm (default 50)",
    )
    parser.add_argument("--storms", type=int, help="storms per variant and round (default 1)")
    parser.add_argument(
        "--growth",
        default=None,
        metavar="SMALL,LARGE",
        help="existing records (default 10000,1000000; smoke 1000,10000)",
    )
    parser.add_argument("--growth-samples", type=int, help="first requests timed per size")
    parser.add_argument("--no-growth", action="store_true", help="skip the growth measurements")
    parser.add_argument(
        "--no-costs", action="store_true", help="skip the in-process per-request costs"
    )
    parser.add_argument("--no-peers", action="store_true", help="leave the peer libraries out")
    parser.add_argument(
        "--variants",
        metavar="A,B,...",
        help="measure only these variants (the references always run)",
    )
    parser.add_argument(
        "--output", type=Path, help="markdown report (default bench/RESULTS.md; smoke: none)"
    )
    parser.add_argument(
        "--asgi",
        action="store_true",
        help="only the ASGI stage: async views under uvicorn, 32 connections (default 3 "
        "rounds; report printed, written only with --output)",
    )
    args = parser.parse_args(argv)
    smoke = bool(args.smoke)
    small, large = (1_000, 10_000) if smoke else (10_000, 1_000_000)
    if args.growth:
        small, large = (int(n) for n in args.growth.split(","))
    output = args.output if args.output is not None else (None if smoke or args.asgi else RESULTS)
    default_rounds = 1 if smoke else (3 if args.asgi else 6)
    return Options(
        smoke=smoke,
        rounds=args.rounds or default_rounds,
        duration=args.duration or (1.0 if smoke else 2.0),
        storm_size=args.storm_size,
        storms_per_round=args.storms or 1,
        growth_small=small,
        growth_large=large,
        growth_samples=args.growth_samples or (100 if smoke else 2000),
        warmup=0.0 if smoke else 1.0,
        cost_blocks=0 if args.no_costs else (1 if smoke else 25),
        peers=not args.no_peers,
        growth=not args.no_growth,
        variants=frozenset(args.variants.split(",")) if args.variants else None,
        output=output,
        command=(
            "python -m bench " + shlex.join(argv if argv is not None else sys.argv[1:])
        ).strip(),
        asgi=bool(args.asgi),
    )
