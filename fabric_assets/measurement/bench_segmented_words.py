"""``python -m fabric_assets.measurement.bench_segmented_words [--script thai|lao]``: what reading Thai or Lao
as words costs.

The word field reads runs of Thai as words since stop 50, and of Lao since stop 51
(:mod:`fabric_resources.word_segmentation`), where it read them as character bigrams. The bench times :func:`~fabric_resources.lexical_index.word_field_text`
on folded prose of the script against the bigram rewrite it replaced (:func:`bigram_reference`, kept here),
alternating the two in one process so that load from elsewhere slows both alike; the ratio is
now / before. The text: runs of 5-30 words of the shipped word list without spaces, as Thai and Lao prose
write them, seeded, each run different, so no cached cut is reused. The word list's one-time load
(first Thai text of a process) is timed apart.
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import time

from fabric_resources.lexical_index import _UNSPACED_RUN, word_field_text
from fabric_resources.text_folding import fold
from fabric_resources.word_segmentation import _LISTS, _cut_short, _dictionary


def bigram_reference(folded: str) -> str:
    """The word field's rewrite before stop 50: every unspaced run, Thai included, as bigrams."""

    def sub(m: re.Match) -> str:
        run = m.group()
        return f" {run} " if len(run) == 1 else " " + " ".join(run[i:i + 2] for i in range(len(run) - 1)) + " "

    return _UNSPACED_RUN.sub(sub, folded)


def prose(script: str, runs: int, seed: int = 50) -> str:
    """``runs`` runs of 5-30 random words of the shipped word list of ``script`` (``Thai``, ``Lao``),
    space between runs, folded."""
    rng = random.Random(seed)
    vocab = sorted(w for w in _LISTS[script]() if w.strip())
    return fold(" ".join("".join(rng.choice(vocab) for _ in range(rng.randint(5, 30))) for _ in range(runs)))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--script", choices=("thai", "lao"), default="thai")
    parser.add_argument("--runs", type=int, default=20000, help="runs of the script in the text (default 20000)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    script = args.script.capitalize()
    start = time.perf_counter()
    _dictionary(script)
    load = time.perf_counter() - start
    text = prose(script, args.runs)
    now, before = [], []
    for _ in range(args.repeat):
        _cut_short.cache_clear()
        start = time.perf_counter()
        word_field_text(text)
        now.append(time.perf_counter() - start)
        start = time.perf_counter()
        bigram_reference(text)
        before.append(time.perf_counter() - start)
    n, b = statistics.median(now), statistics.median(before)
    print(f"{len(text):,} folded characters, {args.runs:,} {script} runs, median of {args.repeat}")
    print(f"words (now):      {n:.2f} s  {len(text) / n / 1e3:,.0f} k characters/s")
    print(f"bigrams (before): {b:.2f} s  {len(text) / b / 1e3:,.0f} k characters/s")
    print(f"now / before: {n / b:.1f}x; the word list loaded and folded once per process: {load:.2f} s")


if __name__ == "__main__":
    main()
