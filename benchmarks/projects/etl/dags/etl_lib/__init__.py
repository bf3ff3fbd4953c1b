"""Helpers shared by the ETL DAGs: reading landing files, money maths, writing reports."""
