"""The data's whole life after ingest: purge (``purge.py``) and the Dagster jobs that run the
lifecycle actions (``jobs.py``). Each action is a plain function the CLI, its job and (later) an
admin route all call."""
