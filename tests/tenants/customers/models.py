"""A tenant (its schema) and the host names that select it."""

from __future__ import annotations

from django_tenants.models import DomainMixin, TenantMixin


class Customer(TenantMixin):
    auto_create_schema = True


class Domain(DomainMixin):
    pass
