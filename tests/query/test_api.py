"""The Python API's argument checks that need no home: a wrong type is a typed error, never an
AttributeError from inside."""

from __future__ import annotations

import pytest

from fabric_query import Fabric
from fabric_query.errors import InvalidArgumentError


@pytest.mark.parametrize("text", [None, 5, b"notes", ["a.txt"]])
def test_source_partitions_refuses_a_text_that_is_not_a_string(text):
    fabric = object.__new__(Fabric)  # the check comes before the home is read
    with pytest.raises(InvalidArgumentError, match=f"as a string, got {type(text).__name__}"):
        fabric.source_partitions(text)
