"""Run test suites through a private Redis Cluster or PgBouncer that this command starts.

    python -m tests.scale.launch cluster   -- tests/stores/test_contract.py -m redis
    python -m tests.scale.launch pgbouncer -- tests/storms/test_concurrency.py

``cluster`` starts 3 primaries and 3 replicas on free loopback ports and runs pytest
with ``REDIS_URL`` pointing at one node and ``REDIS_CLUSTER=1`` (the sample settings
then use :class:`idempotency.redis_cluster.ClusterConnectionFactory`).

``pgbouncer`` starts PgBouncer in transaction pooling mode on a free loopback port in
front of the PostgreSQL of ``DATABASE_URL`` and runs pytest with ``DATABASE_URL``
pointing at PgBouncer (and ``DATABASE_TRANSACTION_POOLING=1``). The test database is
created through PgBouncer and dropped directly at the end (PgBouncer keeps server
connections to it, which a plain ``DROP DATABASE`` would wait for).

Both servers are stopped when pytest ends; the exit status is pytest's.
"""

from __future__ import annotations

import os
import subprocess
import sys
from urllib.parse import urlsplit, urlunsplit

from tests.scale.servers import PgBouncerServer, RedisClusterServer


def _pytest(args: list[str], env: dict[str, str]) -> int:
    return subprocess.call([sys.executable, "-m", "pytest", *args], env={**os.environ, **env})


def run_on_cluster(args: list[str]) -> int:
    cluster = RedisClusterServer().start()
    try:
        print(f"Redis Cluster: {[n.address for n in cluster.nodes]}", flush=True)
        return _pytest(args, {"REDIS_URL": cluster.url, "REDIS_CLUSTER": "1"})
    finally:
        cluster.stop()


def _drop_database(url: str, name: str) -> None:
    import psycopg

    parts = urlsplit(url)
    with psycopg.connect(
        host=parts.hostname or "127.0.0.1",
        port=parts.port or 5432,
        user=parts.username or "postgres",
        password=parts.password or "",
        dbname="postgres",
        autocommit=True,
    ) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')  # type: ignore[arg-type]


def run_through_pgbouncer(args: list[str]) -> int:
    url = os.environ.get("DATABASE_URL", "")
    parts = urlsplit(url)
    if parts.scheme not in {"postgres", "postgresql"}:
        sys.exit("pgbouncer: DATABASE_URL must name the PostgreSQL server to pool")
    bouncer = PgBouncerServer(
        pg_host=parts.hostname or "127.0.0.1",
        pg_port=parts.port or 5432,
        pg_user=parts.username or "postgres",
        pool_size=int(os.environ.get("PGBOUNCER_POOL_SIZE", "30")),
    ).start()
    name = parts.path.lstrip("/") or "postgres"
    test_name = os.environ.get("TEST_DATABASE_NAME") or f"test_{name}"
    netloc = f"{parts.username or 'postgres'}@127.0.0.1:{bouncer.port}"
    pooled = urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))
    try:
        print(f"PgBouncer (transaction pooling) on 127.0.0.1:{bouncer.port}", flush=True)
        return _pytest(
            ["-p", "no:cacheprovider", "--create-db", "--reuse-db", *args],
            {"DATABASE_URL": pooled, "DATABASE_TRANSACTION_POOLING": "1"},
        )
    finally:
        bouncer.stop()
        _drop_database(url, test_name)
        for suffix in ("_replica", "_ledger"):  # the second databases of tests/settings.py
            _drop_database(url, f"test_{name}{suffix}")


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in {"cluster", "pgbouncer"}:
        sys.exit(__doc__)
    command, rest = argv[0], argv[1:]
    if rest and rest[0] == "--":
        rest = rest[1:]
    return run_on_cluster(rest) if command == "cluster" else run_through_pgbouncer(rest)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
