"""The storms: many requests with one new key at once against each variant (one effect
each, or a failure), and as many first requests with distinct keys (the burst to compare)."""

from __future__ import annotations

import uuid

from bench.data import effects
from bench.load import Storm, storm
from bench.progress import log
from bench.results import Results
from bench.stage import Stage
from bench.variants import STORM, Variant, rotate


def check_storm(results: Results, variant: Variant, burst: Storm) -> None:
    """A failure when one of ours did a storm's work more than once, or answered a 5xx."""
    if not variant.ours:
        return
    if burst.effects != 1:
        results.failures.append(f"{variant.name} storm: {burst.effects} effects (must be 1)")
    bad = {s: n for s, n in burst.statuses.items() if s >= 500 or s == 0}
    if bad:
        results.failures.append(f"{variant.name} storm: statuses {burst.statuses}")


def measure_storms(stage: Stage) -> None:
    """Each round, each variant that storms in turn: a storm, then (ours and the peers) a
    burst of as many first requests."""
    options, results, token = stage.options, stage.results, stage.users.token
    log(
        f"storms: {options.storm_size} requests with one key at once, and as many with "
        "distinct keys (a burst of first requests)"
    )
    stormers = [v for v in stage.variants if STORM in v.paths]
    for round_no in range(options.rounds):
        for _ in range(options.storms_per_round):
            for v in rotate(stormers, round_no):
                port = stage.servers[v.name].port
                before_effects = effects()
                key = f"storm-{v.name}-{uuid.uuid4().hex}"
                burst = storm(port, v.path, token=token, key=key, size=options.storm_size)
                after_effects = effects()
                burst.effects = after_effects[0] - before_effects[0]
                burst.balance_change = after_effects[1] - before_effects[1]
                results.storms.setdefault(v.name, []).append(burst)
                check_storm(results, v, burst)
                if v.kind != "reference":  # bare ignores keys: its storm is such a burst
                    distinct = storm(
                        port, v.path, token=token, key=key + "-distinct",
                        size=options.storm_size, distinct=True,
                    )  # fmt: skip
                    results.bursts.setdefault(v.name, []).append(distinct)
                stage.servers[v.name].check_alive()
