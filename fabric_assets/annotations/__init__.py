"""LLM annotations of active parses, the entity graph and annotation vectors (Dagster assets)."""
