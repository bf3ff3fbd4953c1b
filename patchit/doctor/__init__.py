"""patchit.doctor: `patchit doctor`'s checks of an installation, each saying what to fix.

`doctor` holds the `Check` line, the checks of versions, bubblewrap, the state dir and the
runtimes, and `run_checks`; `home` tries what the state dir needs at run time; `warehouse`
(with `snowflake`) says where a dbt candidate would be verified; `airflow` checks where the
failure callback hands a failure over.
"""
