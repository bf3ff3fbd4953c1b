"""The tests' throw-away PostgreSQL clusters: `patchit.bench.pg_server` (the benchmark starts
the same ones)."""

from patchit.bench.pg_server import (
    PG_BIN,
    SUPERUSER,
    PgCluster,
    PostgresMissing,
    check_binaries,
    pg_cluster,
    pg_ctl,
)

__all__ = [
    "PG_BIN",
    "SUPERUSER",
    "PgCluster",
    "PostgresMissing",
    "check_binaries",
    "pg_cluster",
    "pg_ctl",
]
