"""The report's table of who gets a stored response (and each server's memory), with what
the peers' code shows about why."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bench.variants import VARIANTS

if TYPE_CHECKING:
    from bench.results import Results


def probes_and_memory(results: Results, names: list[str]) -> list[str]:
    by_name = {v.name: v for v in VARIANTS}
    lines = [
        "## Who gets a stored response; memory\n",
        "Probed against a primed key: the same request with no credentials, with a bad "
        "token, with a token revoked after priming, and from another user with the same key "
        "and body. A variant authenticates before replaying when the first three get 401 "
        "and the other user never gets the first user's response.\n",
        "| variant | what | no credentials | bad token | revoked token | other user gets "
        "the first user's response | authenticates before replay | peak worker RSS MiB |",
        "| --- | --- | ---: | ---: | ---: | --- | --- | ---: |",
    ]
    for name in names:
        v = by_name[name]
        p = results.probes.get(name)
        rss = results.rss_mib.get(name, 0.0)
        if p is None:
            lines.append(f"| {name} | {v.description} | | | | | | {rss:.1f} |")
        else:
            lines.append(
                f"| {name} | {v.description} | {p.anonymous} | {p.bad_token} | "
                f"{p.revoked_token} | {'yes' if p.other_user_leak else 'no'} | "
                f"{'yes' if p.authenticates else 'no'} | {rss:.1f} |"
            )
    lines += [
        "",
        "From the peers' code: django-idempotency-key looks the key up in its middleware's "
        "`process_view`, before DRF authenticates, and replays there; its stored entry is "
        "keyed by a hash of key, path, method, body and the raw `Authorization` header, so a "
        "different or missing header misses (the view then answers 401) but a revoked token "
        "still gets the replay. drf-idempotency's middleware replays before the view runs "
        "(before DRF authentication) and keys records by the key alone (fingerprint: method, "
        "path, body), so any caller with the key and body gets the stored response. Ours "
        "look the key up after DRF's `initial()` (authentication, permissions, throttles), "
        "scoped per user.\n",
    ]
    return lines
