"""The environment variables by which the `patchit dbt` wrapper talks to its dbt child
(`patchit.intake.dbt_child`): a leaf module, so the wrapper's side (`dbt_run`) and the
child's (which turns failures into events through `patchit.intake.dbt`) share the names
without importing each other."""

INVOCATION_ENV = "PATCHIT_DBT_INVOCATION"  # the user's own args, set by patchit.intake.dbt
# An fd to write one line to when the first node errors (the wrapper starts healing work)
FAILED_FD_ENV = "PATCHIT_DBT_FAILED_FD"
# The wrapper's spool ticket: spool the failures as soon as dbt returns (intake.dbt_spool)
SPOOL_ENV = "PATCHIT_DBT_SPOOL"
