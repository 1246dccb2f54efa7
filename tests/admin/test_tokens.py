"""The admin of submit tokens (idempotency.admin.tokens): read-only."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.django_db


def test_submit_token_admin_is_read_only(admin_client: Any) -> None:
    from idempotency.tokens import issue_submit_token

    issue_submit_token(user_or_scope="user:42", purpose="order-form")
    listing = admin_client.get("/admin/idempotency/submittoken/")
    assert listing.status_code == 200
    assert b"order-form" in listing.content
    assert admin_client.get("/admin/idempotency/submittoken/add/").status_code == 403
