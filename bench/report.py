"""The markdown report of a run: the header (command, machine, method), then each
section's tables in turn (their modules: ``bench/*_report.py`` and :mod:`bench.targets`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bench.costs_report import costs_table
from bench.env import SERVER_SIDE_BINDING
from bench.growth_report import growth_table
from bench.probe_report import probes_and_memory
from bench.steady_report import per_round, sql_added, steady_paths
from bench.storm_report import storm_table
from bench.summaries import summarize_paths, summarize_storms
from bench.targets import targets_table
from bench.variants import VARIANTS

if TYPE_CHECKING:
    from bench.options import Options
    from bench.results import Results


def render(results: Results, options: Options) -> str:
    names = [v.name for v in VARIANTS if any(k[0] == v.name for k in results.phases)]
    summaries = summarize_paths(results, names)
    storms = {n: summarize_storms(b) for n, b in results.storms.items()}
    bursts = {n: summarize_storms(b) for n, b in results.bursts.items()}
    out = header(results, options)
    out += steady_paths(summaries)
    out += sql_added(names, summaries)
    out += storm_table(options.storm_size, names, summaries, storms, bursts)
    out += probes_and_memory(results, names)
    if results.costs is not None:
        out += costs_table(results.costs)
    if results.breakdown:
        out.append(results.breakdown)
    if results.growth is not None:
        out += growth_table(results.growth)
    out += targets_table(results, summaries, storms, bursts)
    out += per_round(results, names, options.rounds)
    if results.failures:
        out += ["## Failures\n", *(f"- {failure}" for failure in results.failures), ""]
    return "\n".join(out)


def header(results: Results, options: Options) -> list[str]:
    """The title, the command, the machine and how the HTTP phases measure."""
    title = "Benchmark smoke run" if options.smoke else "Benchmark results"
    m = results.machine
    return [
        f"# {title}: django-idempotency vs a bare endpoint and peer libraries\n",
        f"Command: `{options.command}` ({options.rounds} interleaved round(s) of "
        f"{options.duration:g} s per variant and path; total {results.seconds:.0f} s).  ",
        f"Machine: {m.get('nproc')} CPUs, {m.get('cpu')}; PostgreSQL {m.get('postgresql')}, "
        f"Redis {m.get('redis')}; Python {m.get('python')}, Django {m.get('django')}, "
        f"DRF {m.get('drf')}; {m.get('wrk')}.  ",
        f"Load average before / after the HTTP phases: {m.get('load_before')} / "
        f"{m.get('load_after_load')} (the machine is shared: other work runs beside).\n",
        "Server: gunicorn, 2 sync workers per variant (each variant its own server), "
        "DEBUG off, persistent connections, one middleware (the SQL counter), "
        + (
            "psycopg with server-side binding and prepared statements "
            "(`server_side_binding`, `prepare_threshold` 5). "
            if SERVER_SIDE_BINDING
            else "psycopg with Django's default client-side binding. "
        )
        + "Load: wrk, 2 threads, 4 connections, run on the same machine. "
        "The reference (first request: `bare`; replay: `noop`) runs before, between and "
        "after the variants of every round; a ratio is the median over rounds of a run's req/s "
        "over the mean of the two reference runs beside it. SQL/req counts statements through "
        "Django's cursor on the server (BEGIN/COMMIT not included). *Good req/s* counts only "
        "the responses with the status the path expects (201 for a first request; the "
        "variant's replay status for a replay), and the ratios are taken on it: a fast error "
        "is not throughput.\n",
    ]


__all__ = ["render"]
