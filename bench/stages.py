"""The stages of a run over HTTP, each against the variants' running servers.

* the steady paths: wrk against each variant's server, in interleaved rounds with the
  path's reference (``bare`` for a first request, ``noop`` for a replay) before, between
  and after the variants, each ratio taken against the two reference runs beside it;
* the storms: many requests with one new key at once against each variant (one effect
  each, or a failure), and as many first requests with distinct keys (the burst to
  compare);
* the probes: who gets a stored response, a primed key of each variant replayed to
  callers who must not get it (no credentials, a bad token, a revoked token, another
  user);
* the ASGI stage (``python -m bench --asgi``): ``async def`` views under uvicorn with 2
  workers and ``ASGI_CONNECTIONS`` connections, the bare async view before, between and
  after the variants (a replay sends one primed key; the bare view answers 201 to it as
  to any request).
"""

from __future__ import annotations

import statistics
import uuid
from dataclasses import dataclass, field

from bench.data import Users, effects
from bench.load import Phase, Reply, Storm, post, run_wrk, storm
from bench.options import Options
from bench.report import Probe, Results
from bench.servers import Server, ServerError, log
from bench.variants import ASGI_VARIANTS, FIRST, REPLAY, STORM, Variant, reference, rotate


@dataclass(frozen=True)
class Stage:
    options: Options
    variants: list[Variant]
    #: variant name -> its running server
    servers: dict[str, Server]
    users: Users
    results: Results


def prime(server: Server, variant: Variant, token: str, key: str) -> Reply:
    """A first request with ``key`` that must succeed, so the key has a stored response."""
    reply = post(server.port, variant.path, token=token, key=key)
    if not 200 <= reply.status < 300:
        raise ServerError(
            f"{variant.name}: priming request answered {reply.status}: {reply.body[:300]!r}\n"
            f"{server.log_tail()}"
        )
    return reply


def probe(server: Server, variant: Variant, users: Users) -> Probe:
    """Replays to an anonymous caller, a bad token, a revoked token, another user?"""
    from rest_framework.authtoken.models import Token

    key = f"probe-{variant.name}-{uuid.uuid4().hex[:8]}"
    first = prime(server, variant, users.token, key)
    result = Probe()
    result.anonymous = post(server.port, variant.path, token=None, key=key).status
    result.bad_token = post(server.port, variant.path, token="0" * 40, key=key).status
    other = post(server.port, variant.path, token=users.other_token, key=key)
    result.other_user_leak = other.body == first.body
    Token.objects.filter(user=users.revoked_user).delete()
    revoked = Token.objects.create(user=users.revoked_user)
    revoked_key = f"{key}-revoked"
    prime(server, variant, revoked.key, revoked_key)
    old = revoked.key
    revoked.delete()
    result.revoked_token = post(server.port, variant.path, token=old, key=revoked_key).status
    return result


def probe_variants(stage: Stage) -> None:
    """The probe of every variant that replays, the references aside, into the results."""
    for v in stage.variants:
        if REPLAY in v.paths and v.kind != "reference":
            stage.results.probes[v.name] = probe(stage.servers[v.name], v, stage.users)


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


ASGI_CONNECTIONS = 32


def measure_asgi(
    options: Options, servers: dict[str, Server], token: str
) -> tuple[dict[tuple[str, str], list[float]], list[str]]:
    """The ratios of each (variant, path) over its rounds, and the failures seen."""
    run_id = uuid.uuid4().hex[:8]
    variants = [v for v in ASGI_VARIANTS if options.variants is None or _chosen(v, options)]
    ref = next(v for v in variants if v.kind == "reference")
    ours = [v for v in variants if v is not ref]
    replay_keys = {v.name: f"replay-{v.name}-{run_id}" for v in variants}
    for v in variants:
        prime(servers[v.name], v, token, replay_keys[v.name])
    failures: list[str] = []

    def phase(v: Variant, path: str, seconds: float, tag: str) -> Phase:
        url = servers[v.name].base_url + v.path
        if path == FIRST:
            key, mode = f"first-{v.name}-{run_id}-{tag}", "unique"
        else:
            key, mode = replay_keys[v.name], "fixed"
        result = run_wrk(
            url, mode=mode, token=token, key=key, seconds=seconds, connections=ASGI_CONNECTIONS
        )
        servers[v.name].check_alive()
        bad = {s: n for s, n in result.statuses.items() if s != 201}
        if bad or not result.requests:
            failures.append(f"{v.name} {path}: statuses {result.statuses}")
        return result

    if options.warmup:
        log("asgi: warming up")
        for v in variants:
            for path in (FIRST, REPLAY):
                phase(v, path, options.warmup, "warmup")
    ratios: dict[tuple[str, str], list[float]] = {}
    for round_no in range(options.rounds):
        for path in (FIRST, REPLAY):
            order = rotate(ours, round_no)
            log(f"asgi round {round_no + 1}/{options.rounds} {path}: " + " ".join(
                v.name for v in order))  # fmt: skip
            before = phase(ref, path, options.duration, f"r{round_no}-ref0")
            for i, v in enumerate(order):
                measured = phase(v, path, options.duration, f"r{round_no}")
                after = phase(ref, path, options.duration, f"r{round_no}-ref{i + 1}")
                neighbours = (before.good_rps(201) + after.good_rps(201)) / 2
                if neighbours:
                    ratios.setdefault((v.name, path), []).append(
                        measured.good_rps(201) / neighbours
                    )
                ratios.setdefault((ref.name, path), []).extend(
                    [before.good_rps(201), after.good_rps(201)]
                )
                before = after
    return ratios, failures


def _chosen(v: Variant, options: Options) -> bool:
    return v.kind == "reference" or v.name in (options.variants or ())


def render_asgi(ratios: dict[tuple[str, str], list[float]], options: Options) -> str:
    """A markdown table: each variant's median ratio (and its range) per path."""
    lines = [
        f"ASGI: uvicorn, 2 workers, {ASGI_CONNECTIONS} connections, {options.rounds} "
        f"interleaved rounds of {options.duration:g} s",
        "",
        "| variant | path | × bare async view (median) | range | bare req/s (median) |",
        "| --- | --- | --- | --- | --- |",
    ]
    for v in ASGI_VARIANTS:
        if v.kind == "reference":
            continue
        for path in (FIRST, REPLAY):
            values = ratios.get((v.name, path))
            if not values:
                continue
            bare = ratios.get(("async-bare", path), [0.0])
            lines.append(
                f"| {v.name} | {path} | {statistics.median(values):.2f} | "
                f"{min(values):.2f}–{max(values):.2f} | {statistics.median(bare):.0f} |"
            )
    return "\n".join(lines) + "\n"
