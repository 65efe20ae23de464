"""The parser slot: pure format readers, bytes -> canonical units with locators.

Shared by the write side (the parse assets store units) and the read side
(``resolve`` re-derives cited units from the current source bytes), so it lives
in the lower layer. One sub-package per format declares a
:class:`~fabric_resources.parsing.spec.ParserSpec` as ``SPEC``; the registry
discovers them. What every parser returns is :mod:`.document`; how parsed units
become table rows (with their IDs) is :mod:`.records`.
"""
