"""patchit.harnesses.airflow: the Airflow harnesses, local and in docker compose.

`harness` is the local harness (`AirflowHarness`): a DAG import check, then the failed tasks in
one run with an isolated AIRFLOW_HOME (`home`); `runner` is the side that runs inside a process
with Airflow imported, `fork` the warm parent that forks one child per candidate and `warmup`
its first run. `compose` runs the same inside the user's docker-compose stack, from the plan
`compose_plan` builds without an engine.
"""
