"""Sample app: accounts with a balance, an optimistic version and a ledger."""
