"""The tenant and domain models django-tenants needs."""
