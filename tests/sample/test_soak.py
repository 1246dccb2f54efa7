"""The soak's judgement and report (chaos/soak_report.py), on figures made up here; the
soak itself runs with ``python3 dev.py soak`` (CI: ``.ci/soak-smoke``)."""

from __future__ import annotations

import dataclasses
import xml.etree.ElementTree as ET
from typing import Any

from chaos.soak_report import Bucket, criteria, markdown, renewal_histogram, svg

END: dict[str, Any] = {
    "keys applied twice": 0,
    "2xx not applied": 0,
    "gave up": 0,
    "stuck in progress": 0,
    "answers that differ from the first": 0,
    "payments answered 2xx": 40,
    "charges for them": 40,
    "balances not equal to their ledger": 0,
    "renewals": renewal_histogram([]),
}


def buckets(rss: list[float], records: int = 500) -> list[Bucket]:
    return [
        Bucket(start=60.0 * i, operations=400, worker_rss_max_mib=mib, records=records)
        for i, mib in enumerate(rss)
    ]


def verdicts(judged: list[tuple[str, bool | None, str]]) -> dict[str, bool | None]:
    return {name: held for name, held, _ in judged}


def test_a_clean_run_passes_every_measured_criterion() -> None:
    judged = verdicts(criteria(buckets([80, 90, 91, 92]), END, ttl=60, bucket=60))
    assert all(judged[name] for name in judged if "renewal" not in name), judged
    # what the soak cannot measure is reported as such, never as a pass
    assert judged["no renewal started later than a third of the lease"] is None


def test_each_broken_invariant_fails_its_criterion() -> None:
    doubled = {**END, "keys applied twice": 1, "charges for them": 41}
    judged = verdicts(criteria(buckets([80, 90, 91]), doubled, ttl=60, bucket=60))
    assert judged["zero doubles"] is False
    assert judged["N payments gave N charges"] is False
    differ = {**END, "answers that differ from the first": 2}
    assert verdicts(criteria(buckets([80, 90]), differ, 60, 60))["zero mismatched answers"] is False


def test_memory_growth_after_warm_up_and_unbounded_records_fail() -> None:
    # the first bucket is the warm-up: 80 -> 90 does not count, 90 -> 100 (+11 %) does
    judged = verdicts(criteria(buckets([80, 90, 95, 100]), END, ttl=60, bucket=60))
    assert judged["worker RSS growth under 10 % after warm-up"] is False
    grown = verdicts(criteria(buckets([90, 90, 90], records=10_000), END, ttl=60, bucket=60))
    assert grown["records bounded by TTL and purge"] is False


def test_a_renewal_later_than_a_third_of_the_lease_fails() -> None:
    # (seconds late, the lease): 0.2 s of 4 s is in time, 1.5 s of 4 s is not
    in_time = {**END, "renewals": renewal_histogram([(0.2, 4.0), (0.01, 4.0)])}
    late = {**END, "renewals": renewal_histogram([(0.2, 4.0), (1.5, 4.0)])}
    name = "no renewal started later than a third of the lease"
    assert verdicts(criteria(buckets([80, 90]), in_time, 60, 60))[name] is True
    assert verdicts(criteria(buckets([80, 90]), late, 60, 60))[name] is False
    assert late["renewals"]["<= 0.67 lease"] == 1


def test_the_report_has_a_row_per_bucket_and_a_chart_line_per_series() -> None:
    run = [dataclasses.replace(b, p50_ms=20.0 + i) for i, b in enumerate(buckets([80, 90, 91]))]
    judged = criteria(run, END, ttl=60, bucket=60)
    text = markdown(run, END, judged, "head")
    assert text.count("\n| 1.0 |") == 1 and "| zero doubles | pass |" in text
    chart = ET.fromstring(svg(run))
    lines = chart.findall("{http://www.w3.org/2000/svg}polyline")
    assert len(lines) == 8  # 3 + 2 + 3 series
    assert all(len(line.get("points", "").split()) == 3 for line in lines)
