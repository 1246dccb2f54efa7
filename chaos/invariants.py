"""What must hold after every scenario, read straight from the database (and Redis).

* no key applied twice: at most one ledger row (and one payment) per key;
* every 2xx applied once: a key answered 2xx has exactly one effect;
* no stray effect: every ledger row of the chaos accounts belongs to a key we sent
  (a second credit under another reference would show here);
* nothing left in progress beyond its lease: a key whose owner died, or whose store went
  away before the answer was recorded, is retried once more after its lease (as its
  client would) and must then finish with the same answer and still one effect;
* every account's balance equals the sum of its ledger;
* all 2xx answers of one key carry the same body.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from chaos.client import Outcome
from idempotency.stores.records import record_digest

FUNDING = "chaos-funding"


def effect_reference(outcome: Outcome) -> str:
    if outcome.kind == "pay":
        return f"pay_{outcome.pay_no}"
    return f"idem_{record_digest(outcome.user.scope, outcome.key)}"


@dataclass
class Verdict:
    calls: int = 0  # keyed calls, each retried until answered
    requests: int = 0  # HTTP requests, retries included
    keys: int = 0
    ok: int = 0
    failed: int = 0  # keys whose final answer was not 2xx (gave up, or refused)
    retried: int = 0  # requests beyond the first of each key
    transient: dict[int, int] = field(default_factory=dict)  # status -> count seen
    dupes: int = 0
    not_applied: int = 0
    stray: int = 0
    stuck: int = 0  # still in progress past its lease after the clients' retries
    abandoned: int = 0  # keys found in progress past their lease, retried once more
    unbalanced: int = 0
    diverging: int = 0
    notes: list[str] = field(default_factory=list)

    def passed(self, *, failures_allowed: bool = False) -> bool:
        hard = (
            self.dupes + self.not_applied + self.stray + self.stuck + self.unbalanced
            + self.diverging
        )  # fmt: skip
        return hard == 0 and (failures_allowed or self.failed == 0)


class Checker:
    """Checks outcomes against the private database; remembers every key ever sent."""

    def __init__(self, database_url: str, redis_url: str, store: str) -> None:
        self.database_url = database_url
        self.redis_url = redis_url
        self.store = store
        self.known: set[tuple[int, str]] = set()

    def _rows(self, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
        import psycopg

        with psycopg.connect(self.database_url, autocommit=True, connect_timeout=10) as conn:
            return list(conn.execute(sql, params).fetchall())

    def remember(self, outcomes: list[Outcome]) -> None:
        for outcome in outcomes:
            if outcome.kind in ("deposit", "pay"):
                self.known.add((outcome.user.account, effect_reference(outcome)))

    def verify(self, outcomes: list[Outcome], accounts: list[int]) -> Verdict:
        self.remember(outcomes)
        verdict = Verdict(calls=len(outcomes))
        for outcome in outcomes:
            verdict.requests += len(outcome.statuses)
            verdict.retried += max(0, len(outcome.statuses) - 1)
            for status in outcome.statuses:
                if status == 0 or status >= 400:
                    verdict.transient[status] = verdict.transient.get(status, 0) + 1
            if outcome.ok:
                verdict.ok += 1
            else:
                verdict.failed += 1
        bodies: dict[str, set[bytes]] = {}
        for outcome in outcomes:
            if outcome.kind in ("deposit", "pay"):  # an order's body shows its later status
                bodies.setdefault(outcome.key, set()).update(outcome.bodies)
        verdict.diverging = sum(1 for seen in bodies.values() if len(seen) > 1)
        ledger = self._rows(
            "SELECT account_id, reference, count(*) FROM accounts_ledgerentry "
            "WHERE account_id = ANY(%s) GROUP BY 1, 2",
            [accounts],
        )
        counts = {(account, reference): n for account, reference, n in ledger}
        payments = dict(
            self._rows(
                "SELECT pay_no, count(*) FROM payments_paymentrecord WHERE pay_no = ANY(%s) "
                "GROUP BY 1",
                [[o.pay_no for o in outcomes if o.kind == "pay"]],
            )
        )
        distinct = {(o.user.id, o.key): o for o in outcomes}
        answered = {o.key for o in outcomes if o.ok}
        verdict.keys = len(distinct)
        for outcome in distinct.values():
            if outcome.kind not in ("deposit", "pay"):
                continue
            applied = counts.get((outcome.user.account, effect_reference(outcome)), 0)
            if outcome.kind == "pay":
                applied = max(applied, payments.get(outcome.pay_no, 0))
            if applied > 1:
                verdict.dupes += 1
            if outcome.key in answered and applied != 1:
                verdict.not_applied += 1
        for (account, reference), n in counts.items():
            if reference != FUNDING and (account, reference) not in self.known:
                verdict.stray += n
                verdict.notes.append(f"stray ledger row {account}/{reference}")
        verdict.unbalanced = len(
            self._rows(
                "SELECT a.id FROM accounts_account a LEFT JOIN (SELECT account_id, "
                "sum(amount) AS total FROM accounts_ledgerentry GROUP BY 1) l "
                "ON l.account_id = a.id WHERE a.balance <> coalesce(l.total, 0)",
                [],
            )
        )
        verdict.stuck = len(self.abandoned())
        tasks = len(self.abandoned(calls=True))
        if tasks:
            verdict.notes.append(f"{tasks} eager task record(s) left in progress (not redelivered)")
        return verdict

    def abandoned(self, *, any_lease: bool = False, calls: bool = False) -> set[str]:
        """HTTP records still in progress whose lease has run out (``any_lease``: or not):
        their owner died after the claim, or its store went away before it could record
        the answer. Named by the digest of their (scope, key). ``calls``: the records of
        functions and tasks instead (the sample's tasks run eagerly here, in the request
        that paid: nothing redelivers them, so an abandoned one stays until it expires)."""
        methods = "IN" if calls else "NOT IN"
        if self.store != "redis":
            lease = "" if any_lease else "AND lease_expires_at < now() "
            rows = self._rows(
                "SELECT scope, key FROM idempotency_idempotencyrecord WHERE state = "
                f"'in_progress' {lease}AND expires_at > now() "
                f"AND method {methods} ('TASK', 'FUNCTION')",
                [],
            )
            return {record_digest(scope, key) for scope, key in rows}
        import redis

        client = redis.Redis.from_url(self.redis_url, socket_timeout=5)
        seconds, micros = client.time()
        now = seconds * 1000 + micros // 1000
        found: set[str] = set()
        for name in client.scan_iter(match="idem:{*}:rec", count=500):
            state, lease_ms, claimed_by = client.hmget(name, ["state", "lease", "method"])
            if (claimed_by in (b"TASK", b"FUNCTION")) != calls:
                continue
            if state == b"p" and (any_lease or int(lease_ms or 0) < now):
                found.add(name.decode().split("{", 1)[1].split("}", 1)[0])
        return found

    def abandoned_calls(self, outcomes: list[Outcome]) -> list[Outcome]:
        """The calls of ``outcomes`` whose record was abandoned (one per key)."""
        digests = self.abandoned()
        calls = {}
        for outcome in outcomes:
            if record_digest(outcome.user.scope, outcome.key) in digests:
                calls[outcome.key] = outcome
        return list(calls.values())
