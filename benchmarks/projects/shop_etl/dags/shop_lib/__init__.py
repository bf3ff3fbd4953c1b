"""Helpers shared by the shop's DAGs: landing files in, staged and published JSON out."""
