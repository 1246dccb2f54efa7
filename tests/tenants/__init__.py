"""A django-tenants project (a PostgreSQL schema per tenant) for the scope tests of
issue 43, finding 4: run in a process of its own by ``tests/test_tenants.py``."""
