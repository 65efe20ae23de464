"""Legacy code pages: how often random bytes read as text, and real short lines read right (trial 15a).

``python -m fabric_assets.measurement.legacy_pages`` prints, for :func:`decode_text`:

* random bytes, seeds 0-1999, 10-63 bytes each a space (15 %) or drawn from: ``letters`` 0xC0-0xFF
  (letters in every Cyrillic, Greek, Hebrew and Arabic page), ``high`` 0x80-0xFF, ``mixed`` 0x80-0xFF
  or an ASCII small letter (30 %), ``lower`` 0xE0-0xFF (windows-1251's small letters); and ``long``,
  seeds 0-299, 64-400 bytes of ``letters``: how many read as a page of
  :data:`~fabric_resources.parsing.text.script_pages.SCRIPT_PAGES` (they are no text);
* real lines under 64 bytes, each sentence of :data:`SENTENCES` and every run of two or more of its
  words with 10 letters or more, and lists of CLDR territory and language names (from Babel's locale
  data, when Babel is installed), in every page of their language: how many decode exactly, fail
  undecodable, or read wrong.

Times are not measured; the figures are counts (``docs/reliability.md``, trial 15a).
"""

from __future__ import annotations

import random
from collections import Counter

from fabric_resources.parsing.document import ParseError
from fabric_resources.parsing.text.decoding import decode_text
from fabric_resources.parsing.text.script_pages import SCRIPT_PAGE_BY_ENCODING

#: Each language's pages as the measurement encodes it.
PAGES: dict[str, tuple[str, ...]] = {
    "ru": ("cp1251", "koi8_r", "iso8859_5", "cp866"), "uk": ("cp1251", "koi8_u"), "bg": ("cp1251",),
    "el": ("cp1253", "iso8859_7"), "ar": ("cp1256", "iso8859_6"), "be": ("cp1251",), "mk": ("cp1251",),
    "sr": ("cp1251",),
}
#: Sentences written for this measurement (trial 15a), one a line.
SENTENCES: dict[str, tuple[str, ...]] = {
    "ru": (
        "Москва — столица России.",
        "Вчера мы ходили в театр.",
        "Ёлка стояла в углу.",
        "Мама мыла раму, а папа читал газету.",
        "Завтра будет дождь, возьми зонт.",
        "Я не знаю, где он живёт.",
        "Поезд отправляется в семь часов утра.",
        "На улице было холодно и темно.",
        "Она купила хлеб, молоко и яблоки.",
        "Дети играли во дворе до вечера.",
        "Этот вопрос требует внимательного изучения.",
        "Мы долго гуляли по набережной реки.",
        "Сегодня в библиотеке много студентов.",
        "Письмо пришло только через неделю.",
        "Врач посоветовал ему больше отдыхать.",
        "Кошка спит на подоконнике весь день.",
        "Он открыл окно и посмотрел на город.",
        "Наша компания работает с прошлого года.",
        "Пожалуйста, закройте дверь за собой.",
        "Весной в саду цветут яблони и вишни.",
    ),
    "uk": (
        "Київ — столиця України.",
        "Сьогодні гарна погода, ходімо гуляти.",
        "Я люблю читати книжки ввечері.",
        "Ми їдемо до бабусі на вихідні.",
        "Діти співають пісню про весну.",
        "Учора в місті йшов сильний дощ.",
        "Він працює інженером на заводі.",
        "Де знаходиться найближча аптека?",
        "Моя сестра навчається в університеті.",
        "Осінь прийшла раніше, ніж ми чекали.",
        "Ця вулиця веде до старого парку.",
        "Батько приніс свіжий хліб і сир.",
    ),
    "bg": (
        "София е столицата на България.",
        "Днес времето е хубаво и слънчево.",
        "Вчера ходихме на кино с приятели.",
        "Моят брат живее в Пловдив.",
        "Къде е най-близката аптека?",
        "Децата играят в парка до вечерта.",
        "Тази книга е много интересна.",
        "Утре ще вали сняг в планината.",
        "Тя работи като учителка в училище.",
        "Трябва да купим хляб и мляко.",
        "Морето беше спокойно тази сутрин.",
        "Той отвори прозореца и погледна навън.",
    ),
    "el": (
        "Χθες πήγαμε στο θέατρο.",
        "Η Αθήνα είναι η πρωτεύουσα της Ελλάδας.",
        "Σήμερα ο καιρός είναι πολύ ωραίος.",
        "Τα παιδιά παίζουν στην αυλή.",
        "Πού είναι το πλησιέστερο φαρμακείο;",
        "Η θάλασσα ήταν ήρεμη το πρωί.",
        "Ο πατέρας μου δουλεύει στο λιμάνι.",
        "Θέλω ένα καφέ χωρίς ζάχαρη.",
        "Το τρένο φεύγει στις επτά το πρωί.",
        "Διάβασα ένα ενδιαφέρον βιβλίο.",
        "Αύριο θα βρέξει στα βουνά.",
        "Η γιαγιά μου μαγειρεύει πολύ καλά.",
    ),
    "ar": (
        "مرحبا بالعالم",
        "ذهبنا أمس إلى المسرح.",
        "القاهرة هي عاصمة مصر.",
        "الطقس جميل اليوم.",
        "أين أقرب صيدلية؟",
        "يلعب الأطفال في الحديقة.",
        "قرأت كتابا مفيدا هذا الأسبوع.",
        "يعمل أبي في المستشفى.",
        "سيسافر أخي إلى دمشق غدا.",
        "البحر هادئ هذا الصباح.",
        "أحب شرب الشاي مع النعناع.",
        "المكتبة مفتوحة حتى المساء.",
    ),
}


def random_bytes(seed: int, kind: str) -> bytes:
    """The random bytes of ``kind`` (module docstring) for ``seed``."""
    r = random.Random(seed)
    if kind == "long":
        return bytes(0x20 if r.random() < 0.15 else r.randint(0xC0, 0xFF) for _ in range(r.randint(64, 400)))
    low = {"letters": 0xC0, "high": 0x80, "mixed": 0x80, "lower": 0xE0}[kind]
    out = bytearray()
    for _ in range(r.randint(10, 63)):
        x = r.random()
        if x < 0.15:
            out.append(0x20)
        elif kind == "mixed" and x >= 0.7:
            out.append(r.choice(b"abcdefghijklmnopqrstuvwxyz"))
        else:
            out.append(r.randint(low, 0xFF))
    return bytes(out)


def real_lines(seed: int = 0) -> list[tuple[str, str, str]]:
    """``(language, text, encoding)`` for the real lines of the module docstring."""
    out = []
    for language, sentences in SENTENCES.items():
        pieces = set()
        for sentence in sentences:
            words = sentence.split()
            pieces.update(" ".join(words[i:j]) for i in range(len(words)) for j in range(i + 2, len(words) + 1))
        out += [(language, p, e) for p in sorted(pieces) if sum(c.isalpha() for c in p) >= 10
                for e in PAGES[language] if _fits(p, e)]
    try:
        from babel import Locale
    except ImportError:
        return out
    r = random.Random(seed)
    for language, pages in PAGES.items():
        locale = Locale.parse(language)
        names = [n for n in [*locale.territories.values(), *locale.languages.values()]
                 if not any(c.isascii() and c.isalpha() for c in n)]
        r.shuffle(names)
        for encoding in pages:
            line = ""
            for name in (n for n in names if _fits(n, encoding)):
                longer = f"{line}, {name}" if line else name
                if len(longer.encode(encoding)) >= 64 or (line and r.random() < 0.3):
                    if sum(c.isalpha() for c in line) >= 10:
                        out.append((language, line, encoding))
                    line = name
                else:
                    line = longer
    return out


def _fits(text: str, encoding: str) -> bool:
    try:
        return len(text.encode(encoding)) < 64
    except UnicodeEncodeError:
        return False


def _decoded(data: bytes) -> tuple[str, str] | None:
    try:
        return decode_text(data)
    except ParseError:
        return None


def main() -> None:
    for kind, seeds in (("letters", 2000), ("high", 2000), ("mixed", 2000), ("lower", 2000), ("long", 300)):
        read = Counter(d[1] for seed in range(seeds)
                       if (d := _decoded(random_bytes(seed, kind))) and d[1] in SCRIPT_PAGE_BY_ENCODING)
        print(f"random {kind}: {sum(read.values())} of {seeds} read as a script page {dict(read)}")
    outcome: Counter = Counter()
    for language, text, encoding in real_lines():
        decoded = _decoded(text.encode(encoding))
        outcome["undecodable" if decoded is None else "exact" if decoded[0] == text else "wrong"] += 1
    print(f"real lines: {sum(outcome.values())} {dict(outcome)}")


if __name__ == "__main__":
    main()
