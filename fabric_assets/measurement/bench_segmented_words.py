"""``python -m fabric_assets.measurement.bench_segmented_words [--script thai|lao|khmer|myanmar]``: what
reading Thai, Lao, Khmer or Myanmar as words costs.

The word field reads runs of Thai as words since stop 50, of Lao since stop 51, and of Khmer and
Myanmar since stop 52 (:mod:`fabric_resources.word_segmentation`), where it read them as character
bigrams. The bench times :func:`~fabric_resources.lexical_index.word_field_text`
on folded prose of the script against the bigram rewrite it replaced (:func:`bigram_reference`, kept here),
alternating the two in one process so that load from elsewhere slows both alike; the ratio is
now / before. The text: runs of 5-30 words without spaces, as these scripts write prose, seeded,
each run different, so no cached cut is reused; the words are the shipped word list's (Thai, Lao)
or, where none ships (ICU's Khmer and Burmese dictionaries are inside its data), ICU's own cut of
:data:`SENTENCES`. The word list's or ICU's one-time load (first text of a process) is timed apart.
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import time

from fabric_resources.lexical_index import _UNSPACED_RUN, word_field_text
from fabric_resources.text_folding import fold
from fabric_resources.word_segmentation import _LISTS, _cut_short, _dictionary, segmented_words

#: Khmer and Myanmar sentences (news and textbook register) whose ICU words make the bench's prose.
SENTENCES = {
    "Khmer": ["ភាសាខ្មែរជាភាសាផ្លូវការរបស់ប្រទេសកម្ពុជា", "ឆ្មាចូលចិត្តដេកលើសាឡុងនៅក្នុងផ្ទះរបស់យើង",
              "ភ្លៀងធ្លាក់ខ្លាំងនៅរដូវវស្សាធ្វើឱ្យទឹកជំនន់ច្រើនខេត្ត",
              "ផ្សារព្រឹកមានផ្លែឈើច្រើនប្រភេទសម្រាប់ភ្ញៀវទេសចរជ្រើសរើស",
              "រថភ្លើងរត់ពីភ្នំពេញទៅបាត់ដំបងរៀងរាល់ថ្ងៃ", "ខ្ញុំចូលចិត្តញ៉ាំបាយជាមួយគ្រួសារ",
              "សិស្សានុសិស្សរៀនភាសាអង់គ្លេសនៅសាលារៀន", "រដ្ឋាភិបាលបានប្រកាសគោលនយោបាយថ្មីសម្រាប់កសិករ"],
    "Myanmar": ["မြန်မာဘာသာစကားသည်မြန်မာနိုင်ငံ၏ရုံးသုံးဘာသာစကားဖြစ်သည်",
                "ကြောင်သည်ကျွန်ုပ်တို့အိမ်ရှိဆိုဖာပေါ်တွင်အိပ်ရသည်ကိုကြိုက်သည်",
                "မိုးရာသီတွင်မိုးသည်းထန်စွာရွာသဖြင့်ပြည်နယ်များစွာတွင်ရေကြီးသည်",
                "မနက်ဈေးတွင်ခရီးသွားများရွေးချယ်ရန်သစ်သီးအမျိုးမျိုးရှိသည်",
                "ရထားသည်ရန်ကုန်မှမန္တလေးသို့နေ့တိုင်းပြေးသည်", "ကျွန်တော်စာအုပ်ဖတ်နေသည်",
                "ကျောင်းသားများသည်ကျောင်းတွင်အင်္ဂလိပ်စာသင်ကြသည်", "အစိုးရသည်လယ်သမားများအတွက်မူဝါဒအသစ်ကြေညာခဲ့သည်"],
}


def vocabulary(script: str) -> list[str]:
    """The words the bench's prose is made of, unfolded: the shipped list's, or ICU's cut of :data:`SENTENCES`."""
    if script in SENTENCES:
        return sorted({w for s in SENTENCES[script] for w in segmented_words(fold(s))})
    return sorted(w for w in _LISTS[script]() if w.strip())


def bigram_reference(folded: str) -> str:
    """The word field's rewrite before stop 50: every unspaced run, Thai included, as bigrams."""

    def sub(m: re.Match) -> str:
        run = m.group()
        return f" {run} " if len(run) == 1 else " " + " ".join(run[i:i + 2] for i in range(len(run) - 1)) + " "

    return _UNSPACED_RUN.sub(sub, folded)


def prose(script: str, runs: int, seed: int = 50) -> str:
    """``runs`` runs of 5-30 random words of :func:`vocabulary` of ``script`` (``Thai``, ``Lao``,
    ``Khmer``, ``Myanmar``), space between runs, folded."""
    rng = random.Random(seed)
    vocab = vocabulary(script)
    return fold(" ".join("".join(rng.choice(vocab) for _ in range(rng.randint(5, 30))) for _ in range(runs)))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--script", choices=("thai", "lao", "khmer", "myanmar"), default="thai")
    parser.add_argument("--runs", type=int, default=20000, help="runs of the script in the text (default 20000)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    script = args.script.capitalize()
    start = time.perf_counter()
    _dictionary(script) if script in _LISTS else _cut_short(fold(SENTENCES[script][0]))
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
    print(f"now / before: {n / b:.1f}x; the word list (or ICU) loaded once per process: {load:.2f} s")


if __name__ == "__main__":
    main()
