"""The steady paths over HTTP: wrk against each variant's server, in interleaved rounds with
the path's reference before, between and after the variants."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from bench.load import Phase, run_wrk
from bench.probes import prime
from bench.progress import log
from bench.results import Results
from bench.servers import Server
from bench.stage import Stage
from bench.variants import FIRST, REPLAY, Variant, reference, rotate


@dataclass
class Phases:
    """wrk runs against the running servers, as the load user, with this run's keys."""

    servers: dict[str, Server]
    token: str
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    #: variant -> the primed key its replay phases send
    replay_keys: dict[str, str] = field(default_factory=dict)

    def prime_replays(self, variants: list[Variant]) -> None:
        """Give each variant that replays one primed key, the same in every replay phase."""
        self.replay_keys = {
            v.name: f"replay-{v.name}-{self.run_id}" for v in variants if REPLAY in v.paths
        }
        for v in variants:
            if v.name in self.replay_keys:
                prime(self.servers[v.name], v, self.token, self.replay_keys[v.name])

    def run(self, v: Variant, path: str, seconds: float, tag: str) -> Phase:
        """One wrk run: new keys (first requests) or the primed key (replays)."""
        url = self.servers[v.name].base_url + v.path
        if path == FIRST:
            result = run_wrk(
                url,
                mode="unique",
                token=self.token,
                key=f"first-{v.name}-{self.run_id}-{tag}",
                seconds=seconds,
            )
        else:
            result = run_wrk(
                url, mode="fixed", token=self.token, key=self.replay_keys[v.name], seconds=seconds
            )
        self.servers[v.name].check_alive()
        return result


def check_phase(results: Results, variant: Variant, path: str, phase: Phase) -> None:
    """A failure when ours or a reference answered anything but the path's good status."""
    if not variant.ours and variant.kind != "reference":
        return
    expected = variant.expected_status(path)
    unexpected = {s: n for s, n in phase.statuses.items() if s != expected}
    if unexpected or phase.requests == 0:
        results.failures.append(f"{variant.name} {path}: statuses {phase.statuses}")
    errors = {k: n for k, n in phase.errors.items() if n and k != "status"}
    if errors:
        log(f"warning: {variant.name} {path}: wrk socket errors {errors}")


def measure_steady_paths(stage: Stage) -> None:
    """Prime the replay keys, warm up, then the rounds of every path into the results."""
    options = stage.options
    phases = Phases(stage.servers, stage.users.token)
    phases.prime_replays(stage.variants)
    if options.warmup:
        log("warming up every variant")
        for v in stage.variants:
            for path in (FIRST, REPLAY):
                if path in v.paths:
                    phases.run(v, path, options.warmup, "warmup")
    for round_no in range(options.rounds):
        for path in (FIRST, REPLAY):
            _round(stage, phases, path, round_no)


def _round(stage: Stage, phases: Phases, path: str, round_no: int) -> None:
    options, variants, results = stage.options, stage.variants, stage.results
    ref = next(v for v in variants if v.name == reference(path))
    order = rotate([v for v in variants if path in v.paths and v is not ref], round_no)
    log(
        f"round {round_no + 1}/{options.rounds} {path}: {ref.name} between each of "
        + " ".join(v.name for v in order)
    )

    def measured(v: Variant, tag: str) -> Phase:
        phase = phases.run(v, path, options.duration, tag)
        results.phases.setdefault((v.name, path), []).append(phase)
        check_phase(results, v, path, phase)
        return phase

    # the reference runs before, between and after the variants: each variant's
    # ratio is taken against the two reference runs next to it
    before = measured(ref, f"r{round_no}-ref0")
    for i, v in enumerate(order):
        result = measured(v, f"r{round_no}")
        if options.smoke and i < len(order) - 1:
            after = before  # a smoke runs the reference only around the variants
        else:
            after = measured(ref, f"r{round_no}-ref{i + 1}")
        ref_status = ref.expected_status(path)
        neighbours = (before.good_rps(ref_status) + after.good_rps(ref_status)) / 2
        if neighbours:
            results.ratios.setdefault((v.name, path), []).append(
                result.good_rps(v.expected_status(path)) / neighbours
            )
        before = after
