"""URLs of the accounts API (mounted at ``api/accounts/``)."""

from __future__ import annotations

from django.urls import path

from accounts.apis import AccountDepositApi, AccountLedgerApi, AccountMeApi

app_name = "accounts"

urlpatterns = [
    path("me/", AccountMeApi.as_view(), name="me"),
    path("me/deposit/", AccountDepositApi.as_view(), name="deposit"),
    path("me/ledger/", AccountLedgerApi.as_view(), name="ledger"),
]
