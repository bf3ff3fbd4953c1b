"""Benchmarks: a generated dbt project of any size and the `patchit bench` timings."""
