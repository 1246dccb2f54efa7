"""The chart of a report: throughput ratios, ours and the peers', first request and replay.

It is drawn from the "Steady paths" table of a markdown report, so the chart always
shows the numbers of the table beside it. ``python -m bench`` writes it next to the
report (``bench/RESULTS.svg``); ``python -m bench.chart [REPORT.md [OUT.svg]]``
redraws it from a report. Needs matplotlib (the ``bench`` extra).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from bench.variants import FIRST, REPLAY, VARIANTS

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
CHART = RESULTS.with_suffix(".svg")
COLOURS = {"reference": "#9e9e9e", "ours": "#1b7f5b", "peer": "#d08b1c"}
_ROW = re.compile(r"^\| (?P<name>[\w-]+) \| (?P<path>first|replay) \|.*?\| (?P<ratio>[\d.]+) × ")


def ratios(report: str) -> dict[tuple[str, str], float]:
    """(variant, path) -> good req/s ratio against the path's reference, from a report."""
    found: dict[tuple[str, str], float] = {}
    for line in report.splitlines():
        match = _ROW.match(line)
        if match:
            found[(match["name"], match["path"])] = float(match["ratio"])
    return found


def write_chart(report: str, output: Path) -> Path:
    """Draw the ratios of ``report`` as grouped horizontal bars into ``output`` (SVG)."""
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.hashsalt"] = "django-idempotency"  # stable ids in the SVG
    from matplotlib import pyplot as plt
    from matplotlib.patches import Patch

    values = ratios(report)
    if not values:
        raise ValueError("the report has no steady-path ratios to draw")
    paths = [(FIRST, "first request (× bare)"), (REPLAY, "replay (× noop)")]
    figure, axes = plt.subplots(1, 2, figsize=(10, 4.2), sharey=False)
    for axis, (path, title) in zip(axes, paths, strict=True):
        rows = [v for v in VARIANTS if (v.name, path) in values]
        names = [v.name for v in rows][::-1]
        numbers = [values[(v.name, path)] for v in rows][::-1]
        colours = [COLOURS[v.kind] for v in rows][::-1]
        bars = axis.barh(names, numbers, color=colours)
        axis.bar_label(bars, labels=[f"{n:.2f}" for n in numbers], padding=3, fontsize=8)
        axis.axvline(1.0, color="#444444", linewidth=0.8, linestyle="--")
        axis.set_title(title, fontsize=10)
        axis.set_xlim(0, max(numbers) * 1.2)
        axis.tick_params(labelsize=8)
        axis.spines[["top", "right"]].set_visible(False)
    figure.legend(
        handles=[Patch(color=c, label=k) for k, c in COLOURS.items()],
        loc="lower center",
        ncol=3,
        frameon=False,
        fontsize=8,
    )
    figure.suptitle("Good requests per second, relative to the endpoint without idempotency")
    figure.tight_layout(rect=(0, 0.06, 1, 1))
    figure.savefig(output, format="svg", metadata={"Date": None})
    plt.close(figure)
    return output


def main(argv: list[str]) -> int:
    report = Path(argv[0]) if argv else RESULTS
    output = Path(argv[1]) if len(argv) > 1 else report.with_suffix(".svg")
    write_chart(report.read_text(), output)
    print(f"chart written to {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
