"""patchit.worker: healing as a service, without a command per incident.

`worker` heals what is spooled (`patchit worker`, the Airflow heal task); `dbt_wrapper` is the
`patchit dbt` wrapper's policy after dbt ran: heal the build's failures inline, or spool them
for the worker; `state_import` copies one machine's SQLite state into the Postgres state many
workers share (`patchit state import`). They sit above the loop (`patchit/loop/`) and the
stages; nothing below imports them.
"""
