"""Measurement: evaluation, every benchmark, the scaling corpus and the stub chat server.

The top floor beside the CLI: only :mod:`fabric_assets.cli` imports it, always inside a
command, and no product module imports it (tests/test_layering.py). One module
per benchmark (``bench_<name>.py`` is ``fabric bench <name>``; ``bench_formats`` runs with
``python -m``); ``query_latency`` is the query process of ``fabric bench query``, kept free of
Dagster so its times and RSS are those of a query process. Evaluation: ``harness`` (BEIR
collections, splits), ``eval_run`` (``fabric eval``), ``baselines``, ``metrics``, ``tuning``
(``fabric eval-tune``), ``html_extraction``.

This file imports nothing, so that importing one module here loads only what that module needs.
"""
