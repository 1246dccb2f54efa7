"""What :mod:`bench.breakdown` measures of a path and of a round trip's probe."""

from __future__ import annotations

from dataclasses import dataclass, field

from bench.costs import RoundTrips


@dataclass(frozen=True)
class Price:
    wall_us: float
    cpu_us: float


@dataclass
class Path_:
    #: medians per request, µs: wall clock and the request thread's CPU time
    wall_us: float
    cpu_us: float
    trips: RoundTrips
    #: µs per request inside the round trips (:mod:`bench.trips`), wall and CPU
    in_trips_wall_us: float = 0.0
    in_trips_cpu_us: float = 0.0
    #: µs per request outside them (the median of each request's own difference)
    outside_wall_us: float = 0.0
    outside_cpu_us: float = 0.0
    split: dict[str, float] = field(default_factory=dict)
    #: function calls (Python and C) per request by kind: deterministic, unlike times
    calls: dict[str, float] = field(default_factory=dict)
