"""``python -m chaos.soak_plot REPORT_DIR [OUT.png]``: a PNG of a soak's ``soak.json``.

The soak's own chart (``soak.svg``) needs nothing installed; this one, drawn with
matplotlib (the ``bench`` extra), puts each measure on a scale of its own, with the
keep-alive's lateness beside it: operations per minute, p50 and p99, the workers' RSS,
threads and open sockets, Redis keys and database records, the renewals and the latest
one's lateness, and the 5xx answers.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def plot(report: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    buckets = report["buckets"]
    minutes = [b["start"] / 60 for b in buckets]

    def series(name: str) -> list[float]:
        return [float(b[name]) for b in buckets]

    def status(code: str) -> list[int]:
        return [int(b["statuses"].get(code, 0)) for b in buckets]

    fig, axes = plt.subplots(3, 2, figsize=(11, 9), sharex=True)
    (ops, latency), (memory, resources), (records, renewals) = axes
    ops.plot(minutes, series("operations"), color="tab:blue")
    ops.set_title("operations per minute")
    ops.set_ylim(bottom=0)
    latency.plot(minutes, series("p50_ms"), color="tab:green", label="p50")
    latency.plot(minutes, series("p99_ms"), color="tab:red", label="p99")
    latency.set_title("latency per minute, ms (retries included)")
    latency.set_yscale("log")
    latency.legend()
    memory.plot(minutes, series("rss_mib"), color="tab:blue", label="all 4 workers")
    memory.plot(minutes, series("worker_rss_max_mib"), color="tab:red", label="largest worker")
    memory.set_title("workers' RSS, MiB")
    memory.set_ylim(bottom=0)
    memory.legend()
    resources.plot(minutes, series("threads"), color="tab:purple", label="threads")
    resources.plot(minutes, series("sockets"), color="tab:orange", label="open sockets")
    resources.plot(minutes, status("500"), color="tab:red", linestyle=":", label="answers 500")
    resources.set_title("workers' threads and sockets; 500s")
    resources.set_ylim(bottom=0)
    resources.legend()
    keys = [k if k >= 0 else float("nan") for k in series("redis_keys")]  # -1: unreadable
    records.plot(minutes, keys, color="tab:green", label="Redis keys")
    records.plot(minutes, series("records"), color="tab:blue", label="database records")
    records.set_title("records (TTL and purge)")
    records.set_ylim(bottom=0)
    records.legend()
    records.set_xlabel("minute")
    renewals.plot(minutes, series("renewals"), color="tab:blue", label="renewals so far")
    late = renewals.twinx()
    late.plot(
        minutes, series("renewal_late_max_ms"), color="tab:red", label="latest start, ms late"
    )
    late.set_ylim(bottom=0)
    renewals.set_title("keep-alive renewals; the latest's lateness (ms, right)")
    renewals.set_xlabel("minute")
    renewals.legend(loc="upper left")
    late.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    directory = Path(argv[0])
    out = Path(argv[1]) if len(argv) > 1 else directory / "soak.png"
    plot(json.loads((directory / "soak.json").read_text()), out)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
