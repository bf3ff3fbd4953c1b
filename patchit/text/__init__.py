"""patchit.text: what comes from outside, handled before patchit keeps or shows it.

`inputs` reads files named from outside (event files, dbt artifacts, logs, profiles) with
limits; `dbt_args` reads dbt's command line; `redaction` (with `secret_forms`, a secret's
encoded copies) masks secrets in every text before anything is written; `markdown` quotes
untrusted text in reports and pull request bodies. Standard library only and import-light:
the Airflow callback uses them.
"""
