"""Team history against a real PostgreSQL server (a package, so that its conftest does not shadow tests/conftest.py)."""
