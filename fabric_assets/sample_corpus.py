"""A small sample corpus, written by Fabric itself, for the quickstart on a fresh machine.

The texts are original to this project (English, Japanese, Chinese and
Markdown) so the quickstart exercises the word, substring and dense channels.
"""

from __future__ import annotations

from pathlib import Path

SAMPLE_DOCUMENTS: dict[str, bytes] = {
    "notes/lighthouse.md": (
        "# The lighthouse keeper\n\n"
        "Every evening the lighthouse keeper climbed one hundred and twelve steps to light the lamp.\n"
        "She logged the wind, the tide and every ship that passed the northern reef.\n\n"
        "## Storm of March\n\n"
        "During the March storm the lamp failed twice. The keeper replaced the burner by hand\n"
        "and kept the light turning until dawn, when the fishing fleet came home safely.\n"
    ).encode("utf-8"),
    "notes/bread.txt": (
        "Sourdough bread needs three things: flour, water and patience.\r\n\r\n"
        "Feed the starter twelve hours before mixing. A lively starter doubles in size and smells of yoghurt.\r\n\r\n"
        "Bake in a covered pot at a high temperature, then uncover it so the crust can darken.\r\n"
    ).encode("utf-8"),
    "ja/tokens.txt": (
        "認証トークンは、利用者が本人であることを示す短い文字列です。\n\n"
        "トークンの有効期限が切れた場合は、もう一度ログインして新しいトークンを受け取ります。\n\n"
        "灯台守は毎晩ランプに火をともした。\n"
    ).encode("shift_jis"),
    "zh/garden.txt": (
        "园丁每天早上给花园浇水。春天的时候，桃花和梨花一起开放。\n\n"
        "老园丁说，种树最好的时间是十年前，其次是现在。\n"
    ).encode("gb18030"),
}


def write_sample_corpus(target: Path) -> Path:
    """Write the sample documents under ``target`` (idempotent); return ``target``."""
    for rel, data in SAMPLE_DOCUMENTS.items():
        path = target / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_bytes() != data:
            path.write_bytes(data)
    return target
