"""End-to-end tests of ``ctxd serve`` (a package, so that its conftest does not shadow tests/conftest.py)."""
