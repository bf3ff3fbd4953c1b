"""Helpers shared by the example DAGs (a repo module, imported like a user's own)."""
