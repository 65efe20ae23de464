"""``python -m fabric_assets.measurement.bench_entity_match [--keys N ...]``: what finding the
entity names of a query costs the graph channel, per query, as the release's entity keys grow.

Until stop 55 the channel walked every stored key for each query: it counted the longest key's
tokens and tested each key written without spaces as a substring of the query
(:func:`walked_reference`, kept here), and a filtered query built its key set from every mention.
Now the release graph holds a first-characters index of those keys and the longest count
(:func:`~fabric_query.channels.graph.unspaced_key_index`), built once per release. The bench
times both on the same seeded keys (a sixth of them Han) and queries, alternating them in one
process so that load from elsewhere slows both alike, and checks they find the same keys; the
ratio is now / before.
"""

from __future__ import annotations

import argparse
import random
import statistics
import string
import time

from fabric_query.channels.function_words import english_function_words
from fabric_query.channels.graph import MIN_UNSPACED_NAME_CHARS, entity_matches, unspaced_key_index
from fabric_resources.config import EntityMatchConfig
from fabric_resources.text_folding import UNSPACED, normalise_entity_name


def walked_reference(query_text: str, keys: set[str]) -> set[str]:
    """The exact class as the channel found it before stop 55 (function-word names aside)."""
    q = normalise_entity_name(query_text)
    qt = tuple(q.split(" ")) if q else ()
    found = set()
    longest = max((len(k.split(" ")) for k in keys), default=0)
    for n in range(1, min(longest, len(qt)) + 1):
        for i in range(len(qt) - n + 1):
            if " ".join(qt[i:i + n]) in keys:
                found.add(" ".join(qt[i:i + n]))
    for k in keys:
        if len(k) >= MIN_UNSPACED_NAME_CHARS and UNSPACED.search(k) and k in q:
            found.add(k)
    return found


def _keys(n: int, rng: random.Random) -> set[str]:
    word = lambda: "".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 9)))  # noqa: E731
    keys = {" ".join(word() for _ in range(rng.randint(1, 3))) for _ in range(n - n // 6)}
    keys |= {"".join(chr(0x4E00 + rng.randint(0, 3000)) for _ in range(rng.randint(2, 4))) for _ in range(n // 6)}
    return keys


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keys", type=int, nargs="+", default=[10_000, 100_000, 400_000])
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--crowded", type=int, default=50_000, help="keys in the one-bucket worst case")
    args = ap.parse_args(argv)
    rng = random.Random(55)
    cfg = EntityMatchConfig()
    print(f"{'keys':>9} {'before ms/query':>16} {'now ms/query':>13} {'ratio':>8} {'index build s':>14}")
    for n in args.keys:
        keys = _keys(n, rng)
        sample = rng.sample(sorted(keys), 40)
        queries = [f"what did {sample[i]} say to {sample[i + 20]} about 東京 in 1843?" for i in range(args.queries)]
        t = time.perf_counter()
        table, longest = unspaced_key_index(keys), max(len(k.split(" ")) for k in keys)
        build = time.perf_counter() - t
        before, now = [], []
        for q in queries:
            t = time.perf_counter()
            want = walked_reference(q, keys)
            before.append(time.perf_counter() - t)
            t = time.perf_counter()
            got = entity_matches(q, keys, cfg, unspaced=table, longest=longest)
            now.append(time.perf_counter() - t)
            function = english_function_words()
            want = {k for k in want if not all(t in function for t in k.split(" "))}
            assert {m.key for m in got} == want and {sample[len(before) - 1], sample[len(before) + 19]} <= want, q
        b, w = statistics.median(before) * 1000, statistics.median(now) * 1000
        print(f"{len(keys):>9,} {b:>16.3f} {w:>13.3f} {w / b:>8.4f} {build:>14.2f}")
    # The index's worst case: every key in one bucket, and a query repeating the bucket's two
    # characters (each distinct pair of the query is looked up once, so the bucket is walked once).
    keys = {"東京" + chr(0x4E00 + i // 20000) + chr(0x4E00 + i % 20000) for i in range(args.crowded)}
    q = "東京" * 1000
    table = unspaced_key_index(keys)
    t = time.perf_counter()
    want = walked_reference(q, keys)
    b = time.perf_counter() - t
    t = time.perf_counter()
    got = entity_matches(q, keys, cfg, unspaced=table, longest=1)
    w = time.perf_counter() - t
    assert {m.key for m in got} == want
    print(f"crowded bucket, {len(keys):,} keys starting 東京, query 東京×1000: "
          f"before {b * 1000:.1f} ms, now {w * 1000:.1f} ms, ratio {w / b:.4f}")


if __name__ == "__main__":
    main()
