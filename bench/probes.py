"""Who gets a stored response: a primed key of each variant replayed to callers who must
not get it (no credentials, a bad token, a revoked token, another user)."""

from __future__ import annotations

import uuid

from bench.data import Users
from bench.load import Reply, post
from bench.results import Probe
from bench.servers import Server, ServerError
from bench.stage import Stage
from bench.variants import REPLAY, Variant


def prime(server: Server, variant: Variant, token: str, key: str) -> Reply:
    """A first request with ``key`` that must succeed, so the key has a stored response."""
    reply = post(server.port, variant.path, token=token, key=key)
    if not 200 <= reply.status < 300:
        raise ServerError(
            f"{variant.name}: priming request answered {reply.status}: {reply.body[:300]!r}\n"
            f"{server.log_tail()}"
        )
    return reply


def probe(server: Server, variant: Variant, users: Users) -> Probe:
    """Replays to an anonymous caller, a bad token, a revoked token, another user?"""
    from rest_framework.authtoken.models import Token

    key = f"probe-{variant.name}-{uuid.uuid4().hex[:8]}"
    first = prime(server, variant, users.token, key)
    result = Probe()
    result.anonymous = post(server.port, variant.path, token=None, key=key).status
    result.bad_token = post(server.port, variant.path, token="0" * 40, key=key).status
    other = post(server.port, variant.path, token=users.other_token, key=key)
    result.other_user_leak = other.body == first.body
    Token.objects.filter(user=users.revoked_user).delete()
    revoked = Token.objects.create(user=users.revoked_user)
    revoked_key = f"{key}-revoked"
    prime(server, variant, revoked.key, revoked_key)
    old = revoked.key
    revoked.delete()
    result.revoked_token = post(server.port, variant.path, token=old, key=revoked_key).status
    return result


def probe_variants(stage: Stage) -> None:
    """The probe of every variant that replays, the references aside, into the results."""
    for v in stage.variants:
        if REPLAY in v.paths and v.kind != "reference":
            stage.results.probes[v.name] = probe(stage.servers[v.name], v, stage.users)
