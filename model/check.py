"""Check the record protocol's model (protocol.pml) with SPIN, exhaustively.

Every check generates the verifier (``spin -a``) for one configuration of the model,
compiles it with gcc (``-DSAFETY`` for the assertions, ``-DNFAIR=3`` for liveness under
weak fairness; never bitstate: every reachable state is stored) and runs ``pan``, whose
report is parsed here: errors, states stored, transitions, depth reached, whether the
search completed. A check *holds* when the search completed with no error; it *fails*
when pan found a counterexample to the property it targets (only that property's
assertions are compiled in, so an error can only be one of them).

The checks are :data:`CHECKS`: the model verifying clean in each mode, the counterexamples
lease mode has by design without its assumptions (the documented rerun), and one mutant
per plausible bug, each expected to fail its property::

    python3 -m model.check            # every check, a table of outcomes and state counts
    python3 -m model.check lease-live mutant-no-fence-on-complete
    python3 -m model.check --list     # the checks and what each shows
    python3 -m model.check --trail mutant-release-any-owner   # the counterexample, step by step

Needs ``spin`` (Debian's package: ``apt-get install spin``) and ``gcc``.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

MODEL = Path(__file__).resolve().parent / "protocol.pml"

#: The properties, each a bit of the model's ``CHECK`` (see protocol.pml); ``live`` is the
#: LTL formula of the same name, checked for acceptance cycles under weak fairness.
PROPERTIES = {
    "P1": "the effect happens at most once per key",
    "P2": "no two owners both complete the record",
    "P3": "a stale owner's completion, release and renewal are always refused",
    "P4": "every replay returns the completed response, and only it",
    "P5": "a caller never gets a success for a run whose record was lost",
    "P6": "a resent claim or completion recognises its own owner",
    "live": "under weak fairness every request is eventually answered with the result",
}
SAFETY = ("P1", "P2", "P3", "P4", "P5", "P6")


@dataclass(frozen=True)
class Config:
    """A configuration of the model: its mode and the assumptions it makes."""

    name: str
    defines: tuple[str, ...]
    description: str


ATOMIC = Config("atomic", ("ATOMIC",), "atomic mode; crashes, view errors, outages anywhere")
LEASE = Config(
    "lease",
    ("ASSUME_RENEWED", "ASSUME_COMPLETES"),
    "lease mode under A1 (leases renewed in time) and A2 (an owner that ran its effect "
    "reaches its completion); crashes, errors and outages everywhere else",
)
LEASE_FAULTS = Config(
    "lease-faults",
    (),
    "lease mode without assumptions: owners stall past their lease, crash or fail "
    "anywhere, the store goes away anywhere",
)
LEASE_NO_A1 = Config("lease-no-a1", ("ASSUME_COMPLETES",), "lease mode under A2 only")
CACHE = Config(
    "cache-store",
    ("STORE_CACHE", "ASSUME_RENEWED", "ASSUME_COMPLETES"),
    "CacheStore's read-then-write completion, lease mode under A1 and A2",
)
CACHE_FAULTS = Config(
    "cache-store-faults",
    ("STORE_CACHE",),
    "CacheStore's read-then-write completion, lease mode without assumptions",
)
LEASE_NO_A2 = Config("lease-no-a2", ("ASSUME_RENEWED",), "lease mode under A1 only")


@dataclass(frozen=True)
class Check:
    """One run of pan: ``properties`` of ``config`` (with ``mutant``'s bug), and whether
    they are expected to hold or to have a counterexample."""

    name: str
    config: Config
    properties: tuple[str, ...]
    expect: str  # "holds" or "fails"
    why: str
    mutant: str = ""

    @property
    def liveness(self) -> bool:
        return self.properties == ("live",)

    def defines(self) -> list[str]:
        mask = sum(1 << SAFETY.index(p) for p in self.properties if p in SAFETY)
        names = [*self.config.defines, *([f"MUTANT_{self.mutant}"] if self.mutant else [])]
        return [*(f"-D{name}" for name in names), f"-DCHECK={mask}"]


def _clean(config: Config, properties: Sequence[str], why: str) -> Check:
    kind = "live" if tuple(properties) == ("live",) else "safety"
    return Check(f"{config.name}-{kind}", config, tuple(properties), "holds", why)


def _mutant(name: str, config: Config, prop: str, why: str) -> Check:
    check_name = "mutant-" + name.lower().replace("_", "-")
    if config is ATOMIC and name == "LOOKUP_THEN_INSERT":
        check_name += "-atomic"
    return Check(check_name, config, (prop,), "fails", why, mutant=name)


CHECKS: tuple[Check, ...] = (
    # the model verifies clean
    _clean(ATOMIC, SAFETY, "atomic mode keeps every safety property under every fault"),
    _clean(ATOMIC, ["live"], "atomic mode answers every request"),
    _clean(LEASE, SAFETY, "lease mode keeps every safety property under A1 and A2"),
    _clean(LEASE, ["live"], "lease mode answers every request under A1 and A2"),
    _clean(
        LEASE_FAULTS,
        ["P2", "P3", "P4", "P6"],
        "without its assumptions lease mode still fences: one completion, stale owners "
        "refused, replays of the completed response only, resends recognised",
    ),
    _clean(LEASE_FAULTS, ["live"], "lease mode answers every request under every fault"),
    # lease mode's documented rerun: each assumption is needed
    Check(
        "design-rerun-without-a1",
        LEASE_NO_A1,
        ("P1",),
        "fails",
        "an owner stalled past its lease is taken over and the retry runs the effect again",
    ),
    Check(
        "design-rerun-without-a2",
        LEASE_NO_A2,
        ("P1",),
        "fails",
        "an owner that dies after its effect, before its record, is taken over and rerun",
    ),
    Check(
        "design-answer-without-a1",
        LEASE_NO_A1,
        ("P5",),
        "fails",
        "a stale owner's completion is refused, and its caller still gets its own success",
    ),
    Check(
        "design-answer-without-a2",
        LEASE_NO_A2,
        ("P5",),
        "fails",
        "a completion the store could not take (outage) still answers the view's success",
    ),
    # CacheStore's documented weakness: its completion reads, then writes
    _clean(CACHE, SAFETY, "CacheStore keeps every safety property under A1 and A2"),
    Check(
        "design-cache-store-overwrite",
        CACHE_FAULTS,
        ("P3",),
        "fails",
        "without A1, a stale owner's completion read before a takeover overwrites the record",
    ),
    # the mutants: each plausible bug is caught
    _mutant(
        "NO_FENCE_ON_COMPLETE",
        LEASE_FAULTS,
        "P3",
        "completion without the fencing token: a stale owner overwrites the new owner's record",
    ),
    _mutant(
        "LOOKUP_THEN_INSERT",
        LEASE,
        "P1",
        "a claim that looks up, then inserts: two requests both find the key free and both run",
    ),
    _mutant(
        "LOOKUP_THEN_INSERT",
        ATOMIC,
        "P1",
        "atomic mode without the unique index deciding: two transactions both commit",
    ),
    _mutant(
        "RENEW_IGNORES_FENCE",
        LEASE_FAULTS,
        "P3",
        "a keep-alive renewal without the token: a stale owner keeps the new owner's lease",
    ),
    _mutant(
        "RELEASE_ANY_OWNER",
        LEASE_FAULTS,
        "P3",
        "a release without the token: a stale owner's error frees the new owner's claim",
    ),
    _mutant(
        "REPLAY_IN_PROGRESS",
        LEASE,
        "P4",
        "a replay served from an in-progress record: an answer with no stored response",
    ),
    _mutant(
        "NO_TAKEOVER",
        LEASE,
        "live",
        "an abandoned lease never taken over: a crashed owner's key answers 409 forever",
    ),
    _mutant(
        "RESEND_FORGETS_OWNER",
        LEASE,
        "P6",
        "a resend that does not know its own token: a request conflicts with its own claim "
        "for a whole lease, a lost completion reply raises a false stale-owner alarm",
    ),
    _mutant(
        "EFFECT_OUTSIDE_TRANSACTION",
        ATOMIC,
        "P1",
        "atomic mode with a write that commits alone (another database): rerun after a crash",
    ),
    _mutant(
        "ANSWER_BEFORE_COMMIT",
        ATOMIC,
        "P5",
        "atomic mode answering before its commit: a success for a record then rolled back",
    ),
)


@dataclass
class Result:
    """What pan reported for a check."""

    check: Check
    errors: int = -1
    states: int = 0
    transitions: int = 0
    depth: int = 0
    seconds: float = 0.0
    memory_mb: float = 0.0
    complete: bool = False
    violation: str = ""
    output: str = field(default="", repr=False)

    @property
    def outcome(self) -> str:
        """``holds``, ``fails`` (a counterexample to the targeted property), or
        ``inconclusive`` (the search did not complete, or errored otherwise)."""
        if self.errors == 0 and self.complete:
            return "holds"
        if self.errors >= 1 and self.violation:
            return "fails"
        return "inconclusive"

    @property
    def as_expected(self) -> bool:
        return self.outcome == self.check.expect


def spin_available() -> str | None:
    """Why SPIN cannot run here, or None when ``spin`` and ``gcc`` are on the PATH."""
    missing = [tool for tool in ("spin", "gcc") if shutil.which(tool) is None]
    return f"not on the PATH: {', '.join(missing)}" if missing else None


def _run(args: Sequence[str], cwd: Path) -> str:
    done = subprocess.run(list(args), cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0 and args[0] != "./pan":
        raise RuntimeError(f"{' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout + done.stderr


def _number(pattern: str, text: str) -> float:
    """The first number ``pattern`` captures in ``text`` (pan writes big ones as 2.8e+07)."""
    found = re.search(pattern, text)
    return float(found.group(1)) if found else 0.0


def parse(check: Check, output: str) -> Result:
    """pan's report as a :class:`Result`."""
    result = Result(check, output=output)
    number = r"([\d.]+(?:e[+-]?\d+)?)"
    result.errors = int(_number(r"errors: (\d+)", output)) if "errors:" in output else -1
    result.states = int(_number(number + r" states, stored", output))
    result.transitions = int(_number(number + r" transitions", output))
    result.depth = int(_number(r"depth reached (\d+)", output))
    result.memory_mb = _number(number + r"\s+total actual memory usage", output)
    incomplete = ("max search depth too small", "Search not completed", "out of memory")
    result.complete = result.errors >= 0 and not any(text in output for text in incomplete)
    found = re.search(r"pan:1: (assertion violated .*?)(?: \(at depth \d+\))?$", output, re.M)
    if found:
        result.violation = found.group(1)
    elif check.liveness and "acceptance cycle" in output and result.errors >= 1:
        result.violation = "acceptance cycle: a request is never answered"
    return result


def verify(check: Check, *, depth: int = 100_000, hash_bits: int = 23) -> Result:
    """Generate, compile and run the verifier of ``check``; its parsed report."""
    with tempfile.TemporaryDirectory(prefix="spin-") as tmp:
        work = Path(tmp)
        shutil.copy(MODEL, work / MODEL.name)
        started = time.monotonic()
        _run(["spin", "-a", *check.defines(), MODEL.name], work)
        flags = ["-DNFAIR=3"] if check.liveness else ["-DSAFETY", "-DNOCLAIM"]
        # a search expected to stop at a counterexample visits few states: compiling the
        # verifier without optimisation saves more time than its search loses
        flags.append("-O0" if check.expect == "fails" else "-O2")
        _run(["gcc", "-w", "-DMEMLIM=2048", *flags, "-o", "pan", "pan.c"], work)
        args = ["./pan", f"-m{depth}", f"-w{hash_bits}"]
        if check.liveness:
            args += ["-a", "-f", "-N", "live"]
        elif check.expect == "fails":
            args.append("-E")  # only the targeted property's assertions count
        output = _run(args, work)
        result = parse(check, output)
        result.seconds = time.monotonic() - started
        return result


def trail(check: Check) -> str:
    """The counterexample of a failing ``check``, step by step (``spin -t``)."""
    with tempfile.TemporaryDirectory(prefix="spin-") as tmp:
        work = Path(tmp)
        shutil.copy(MODEL, work / MODEL.name)
        _run(["spin", "-a", *check.defines(), MODEL.name], work)
        flags = ["-DNFAIR=3"] if check.liveness else ["-DSAFETY", "-DNOCLAIM"]
        _run(["gcc", "-O0", "-w", *flags, "-o", "pan", "pan.c"], work)
        args = ["./pan", "-m100000", "-E"]
        if check.liveness:
            args += ["-a", "-f", "-N", "live"]
        _run(args, work)
        if not (work / f"{MODEL.name}.trail").exists():
            return "no counterexample"
        replay = _run(["spin", "-t", "-p", *check.defines(), MODEL.name], work)
        return f"{check.name}: {check.why}\n\n{steps(replay)}"


#: A step of ``spin -t -p``: its number, the process (name and pid) and the statement.
_STEP = re.compile(r"^\s*(\d+):\s+proc\s+(\d+) \((\w+):\d+\) \S+ \(state \d+\)\s+\[(.*)\]$")


def steps(replay: str) -> str:
    """A counterexample as one line per step of the model's processes (the start-up steps
    of ``init`` left out): ``step  process  statement``, then SPIN's verdict."""
    lines = []
    for line in replay.splitlines():
        found = _STEP.match(line)
        if found:
            number, pid, name, statement = found.groups()
            if name != ":init:":
                who = f"request {pid}" if name == "Request" else name.lower()
                lines.append(f"{number:>4}  {who:<10} {statement}")
        elif "assertion violated" in line or "CYCLE" in line or "<<<<<" in line:
            lines.append(line.strip())
    return "\n".join(lines)


def select(names: Iterable[str]) -> list[Check]:
    wanted = list(names)
    if not wanted:
        return list(CHECKS)
    known = {check.name: check for check in CHECKS}
    unknown = [name for name in wanted if name not in known]
    if unknown:
        raise SystemExit(f"no such check: {', '.join(unknown)} (--list lists them)")
    return [known[name] for name in wanted]


def run_checks(checks: Sequence[Check], jobs: int = 1) -> list[Result]:
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(verify, checks))


def table(results: Sequence[Result]) -> str:
    rows = [("check", "expect", "outcome", "states", "transitions", "depth", "s", "MB")]
    for r in results:
        mark = "" if r.as_expected else "  <-- UNEXPECTED"
        rows.append(
            (
                r.check.name,
                r.check.expect,
                r.outcome + mark,
                str(r.states),
                str(r.transitions),
                str(r.depth),
                f"{r.seconds:.1f}",
                f"{r.memory_mb:.0f}",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows)
    return "\n".join(line.rstrip() for line in lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m model.check", description=__doc__)
    parser.add_argument("checks", nargs="*", help="check names (default: all)")
    parser.add_argument("--list", action="store_true", help="list the checks")
    parser.add_argument("--trail", metavar="CHECK", help="print a failing check's trail")
    parser.add_argument("--jobs", type=int, default=1, help="checks run at once (default 1)")
    options = parser.parse_args(argv)
    if options.list:
        for check in CHECKS:
            props = ", ".join(check.properties)
            print(f"{check.name:40} {check.expect:6} {props:20} {check.why}")
        return 0
    problem = spin_available()
    if problem:
        print(f"SPIN cannot run: {problem}", file=sys.stderr)
        return 2
    if options.trail:
        print(trail(select([options.trail])[0]))
        return 0
    started = time.monotonic()
    results = run_checks(select(options.checks), options.jobs)
    print(table(results))
    unexpected = [r for r in results if not r.as_expected]
    total = time.monotonic() - started
    print(f"\n{len(results)} checks in {total:.0f} s; {len(unexpected)} not as expected")
    for r in unexpected:
        print(f"\n== {r.check.name}: expected {r.check.expect}, got {r.outcome}\n{r.output}")
    return 1 if unexpected else 0


if __name__ == "__main__":
    raise SystemExit(main())
