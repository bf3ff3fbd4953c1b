"""Integrations that run inside other tools' processes (Airflow): standard library only."""
