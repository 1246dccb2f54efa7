"""What a run measured, as the report reads it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bench.costs import Costs
    from bench.growth import Growth
    from bench.load import Phase, Storm


@dataclass
class Probe:
    """What each caller got back for a primed key of one variant."""

    anonymous: int = 0
    bad_token: int = 0
    revoked_token: int = 0
    other_user_leak: bool = False

    @property
    def authenticates(self) -> bool:
        return (
            self.anonymous == 401
            and self.bad_token == 401
            and self.revoked_token == 401
            and not self.other_user_leak
        )


@dataclass
class Results:
    phases: dict[tuple[str, str], list[Phase]] = field(default_factory=dict)
    #: per round: a variant's req/s over the mean of the two reference runs beside it
    ratios: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    storms: dict[str, list[Storm]] = field(default_factory=dict)
    #: bursts of as many first requests (distinct keys) as a storm, at the same concurrency
    bursts: dict[str, list[Storm]] = field(default_factory=dict)
    probes: dict[str, Probe] = field(default_factory=dict)
    rss_mib: dict[str, float] = field(default_factory=dict)
    growth: Growth | None = None
    costs: Costs | None = None
    failures: list[str] = field(default_factory=list)
    machine: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
