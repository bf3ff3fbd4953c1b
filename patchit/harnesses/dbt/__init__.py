"""patchit.harnesses.dbt: the dbt harness and everything a dbt candidate's run needs.

`harness` is the face (`DbtHarness`, the `patchit.harnesses` entry point `dbt`); `units`
selects and judges, `preparation` makes a run's worktree, environment, warehouse copy and
profile, `changes` tells which nodes a candidate changed; `pg`/`pg_schemas` and `sf` are the
Postgres and Snowflake sandbox schemas. The warm worker (`python -m
patchit.harnesses.dbt.worker`) serves runs (`serve`), each a fork that starts from a saved
parse (`parses`, `saved_parse`, `flat_graph`, `subset`), with dbt tuned once (`tuning`) and
timed (`phases`); `prewarm` starts it before the heal.
"""
