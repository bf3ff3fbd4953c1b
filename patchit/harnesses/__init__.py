"""Harnesses re-run one failed unit the way its runtime does."""
