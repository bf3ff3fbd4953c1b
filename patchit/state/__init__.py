"""patchit.state: where the spool and the attempt memory live.

SQLite files under `$PATCHIT_HOME` by default; one PostgreSQL database shared by many workers
when a state URL is set (`PATCHIT_STATE_URL`, else `[state] url` in `$PATCHIT_HOME/patchit.toml`).
`url` resolves that choice with the standard library only (the Airflow callback reads it);
`pg` connects (psycopg2, imported on first use) and `pgdb` gives the memory's migrations and
queries the small part of sqlite-utils' API they use, over Postgres.
"""
