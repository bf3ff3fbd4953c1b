"""The names the dbt harness and its worker process (`worker`, `worker_handle`) both use: a
module of constants, so that neither side imports the other's code for them (the worker's
process stays free of the harness's imports, the harness free of dbt's tunings)."""

from __future__ import annotations

from pathlib import Path

# What the worker writes in a run's target dir instead of dbt's manifest.json: the nodes
# the run's results name, in the manifest's shape (the data check reads where they were built)
RUN_NODES_FILE = "patchit_run_nodes.json"

# The warm-up's saved parse: where to start from (read-only, patchit's cache) and where to
# leave the parse it ends with (the parent moves it into the cache once the worker is ready).
WARM_UP_PARSE_ENV = "PATCHIT_DBT_WARM_UP_PARSE"
WARM_UP_SAVE_ENV = "PATCHIT_DBT_WARM_UP_SAVE"
WARM_UP_PARSE = Path("dbt") / "warm-up" / "partial_parse.msgpack"  # under patchit's cache
