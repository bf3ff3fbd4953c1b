"""patchit: a self-healing agent for Airflow and dbt pipelines."""

__version__ = "0.1.0"
