"""The orchestration of ``python -m bench`` (its command line: :mod:`bench.options`).

Services and servers up, then each stage in turn (:mod:`bench.stages`): the steady paths,
the storms, the probes; then, in this process, the costs (:mod:`bench.costs`) and the
growth (:mod:`bench.growth`); then the report (:mod:`bench.report`) and its chart.
"""

from __future__ import annotations

import signal
import sys
import tempfile
import time
from pathlib import Path

from bench.data import reset_data, setup_django
from bench.load import LoadError, wrk_path
from bench.options import Options, parse
from bench.report import Results, render
from bench.servers import ServerError, loadavg, log, machine_facts, prepare_services, running
from bench.stages import Stage, measure_steady_paths, measure_storms, probe_variants
from bench.variants import VARIANTS, Variant


def selected(options: Options) -> list[Variant]:
    """The variants the options ask for; the references always, the peers when installed."""
    return [
        v
        for v in VARIANTS
        if (v.kind != "peer" or (options.peers and v.installed))
        and (options.variants is None or v.name in options.variants or v.kind == "reference")
    ]


def run(options: Options) -> Results:
    started = time.perf_counter()
    results = Results()
    variants = selected(options)
    wrk_path()  # fail before anything starts when wrk is missing
    skipped = [v.name for v in VARIANTS if v.kind == "peer" and not v.installed]
    if skipped:
        log(f"peers not installed, left out: {', '.join(skipped)}")
    log("preparing PostgreSQL, Redis and migrations")
    prepare_services(variants)
    setup_django()
    users = reset_data()
    results.machine = machine_facts()
    results.machine["load_before"] = loadavg()
    with running(variants) as servers:
        stage = Stage(options, variants, servers, users, results)
        measure_steady_paths(stage)
        measure_storms(stage)
        log("probes: who gets a stored response")
        probe_variants(stage)
        for name, server in servers.items():
            results.rss_mib[name] = server.peak_worker_rss_mib()
    results.machine["load_after_load"] = loadavg()
    measure_in_process(options, users.token, results)
    results.seconds = time.perf_counter() - started
    return results


def measure_in_process(options: Options, token: str, results: Results) -> None:
    """The stages in this process, the servers stopped: costs, growth."""
    if options.cost_blocks:
        from bench import costs

        log("costs: one request at a time, in-process")
        results.costs = costs.measure(token, blocks=options.cost_blocks)
    if options.growth:
        from bench import growth

        log(f"growth: {options.growth_small:,} vs {options.growth_large:,} records")
        results.growth = growth.measure(
            small=options.growth_small,
            large=options.growth_large,
            samples=options.growth_samples,
            log=log,
        )
        purge = results.growth.purge
        if purge.deleted < options.growth_large:
            results.failures.append(
                f"purge deleted {purge.deleted} of at least {options.growth_large} records"
            )


def _chart(report: str, options: Options) -> Path | None:
    """The SVG chart of the ratios, beside the report (a smoke run draws it to a temp file)."""
    from bench.chart import write_chart

    if options.output is not None:
        return write_chart(report, options.output.with_suffix(".svg"))
    with tempfile.TemporaryDirectory() as tmp:
        chart = write_chart(report, Path(tmp) / "smoke.svg")
        if not chart.read_bytes().lstrip().startswith(b"<?xml"):
            raise RuntimeError("the chart is not an SVG document")
    return None


def run_asgi(options: Options) -> int:
    """``--asgi``: only the ASGI stage (:mod:`bench.stages`), its table printed."""
    from bench.stages import measure_asgi, render_asgi
    from bench.variants import ASGI_VARIANTS

    wrk_path()
    log("preparing PostgreSQL, Redis and migrations")
    prepare_services(ASGI_VARIANTS)
    setup_django()
    users = reset_data()
    with running(ASGI_VARIANTS) as servers:
        ratios, failures = measure_asgi(options, servers, users.token)
    report = render_asgi(ratios, options)
    print(report)
    if options.output is not None:
        options.output.write_text(report)
    if failures:
        log("FAILED:\n  " + "\n  ".join(failures))
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    options = parse(argv)
    # a SIGTERM (timeout, CI) unwinds like Ctrl-C, so the servers are stopped
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    if options.asgi:
        try:
            return run_asgi(options)
        except (ServerError, LoadError) as exc:
            log(f"FAILED: {exc}")
            return 2
    try:
        results = run(options)
    except (ServerError, LoadError) as exc:
        log(f"FAILED: {exc}")
        return 2
    except Exception as exc:
        log(f"FAILED: {type(exc).__name__}: {exc}")
        raise
    report = render(results, options)
    print(report)
    if options.output is not None:
        options.output.write_text(report)
        log(f"report written to {options.output}")
    chart = _chart(report, options)
    if chart is not None:
        log(f"chart written to {chart}")
    if results.failures:
        log("FAILED:\n  " + "\n  ".join(results.failures))
        return 1
    log(f"done in {results.seconds:.0f} s")
    return 0
