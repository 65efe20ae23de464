"""A parser target for the child process that raises the ``OSError`` its input names: ``b"28"``
raises ENOSPC (``tests/resources/test_parsing_robustness.py``, the child's machine faults)."""

from __future__ import annotations

import os


def parse(data: bytes, config, media_type: str):
    code = int(data)
    raise OSError(code, os.strerror(code))
