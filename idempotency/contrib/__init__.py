"""Integrations with other task and web frameworks, each importable only where that
framework is installed; the rest of the package imports none of them."""
