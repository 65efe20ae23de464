"""Retrieval channels. Each returns ``[(chunk_id, score), ...]`` best first, ties by chunk ID,
choosing only among the eligible parses it is given (filters apply before ranking)."""

ChannelResult = list[tuple[str, float]]


def ranked(pairs: list[tuple[str, float]], depth: int) -> ChannelResult:
    """Sort by score descending, then chunk ID ascending (a total order), and cut to ``depth``."""
    return sorted(pairs, key=lambda p: (-p[1], p[0]))[:depth]
