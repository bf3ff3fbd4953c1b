"""patchit.state: where the spool and the attempt memory live.

SQLite files under `$PATCHIT_HOME` by default; one PostgreSQL database shared by many workers
when a state URL is set (`PATCHIT_STATE_URL`, else `[state] url` in `$PATCHIT_HOME/patchit.toml`).
`url` resolves that choice with the standard library only (the Airflow callback reads it);
`pg` connects (psycopg2, imported on first use) and `pgdb` gives the memory's migrations and
queries the small part of sqlite-utils' API they use, over Postgres. `home` is the state dir
rule, `dbfiles` keeps the SQLite files whole (checked on open, moved aside when damaged), and
`liveness` says whether the owner of a claim (a spool row, an incident's lease, a sandbox
schema) is still alive; all three are standard library only.
"""
