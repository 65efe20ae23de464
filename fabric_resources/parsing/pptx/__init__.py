"""PPTX parser plug-in (python-pptx): slide titles, shapes, tables, speaker notes.

The parser is :mod:`.parser`. It runs in-process (``parsers.pptx.isolation``), except a package
whose members declare more than ``parsers.pptx.subprocess_above_bytes`` (uncompressed): lxml
holds the whole part's tree, many times its size, so that one runs in a bounded child process
(:mod:`fabric_resources.parsing.isolation`: ``isolation``'s ``timeout_s`` and ``max_memory_bytes``).
"""

from __future__ import annotations

from fabric_resources.parsing.spec import ParserSpec

PARSER_NAME = "pptx"
PARSER_VERSION = "16"  # 16: the shapes of text a shown slide layout or master draws (not its placeholders' prompts) are note units after the slides, each part once, note_type layout / master, its slides named (trial 24c); 15: a slide's review comments and replies (p:cm, p188:cm) are note units after its notes, note_type comment (trial 22g); 14: a slide part two p:sldId entries name is read once, at its first entry, later slides numbered as shown (repeated_slide_entries; trial 22g); 13: a comment inside a chart's cached c:v no longer splits it into two lines (trial 22g); 12: a comment or processing instruction inside a run's a:t cuts none of its text (trial 22c); 11: a part declaring a DTD is left out and listed (a slide as that slide), the presentation part failing the deck, not read with its entity references cut (OPC M1.18; trial 22c); 10: a package holding two parts of one name fails malformed-pptx (OPC M1.12; trial 22c); 9: a slide whose part is left out is listed once, as the slide, with the part's
#                         reason (cap-depth for libxml2's depth limit), not also with python-pptx's KeyError (trial 20b);
#                         8: an equation in a paragraph (mc:AlternateContent, OMML in its mc:Choice) of a
#                         shape, a table cell or the notes is read in place, a text box added on a notes
#                         page is read with the notes (trial 19b);
#                         7: a shape inside mc:AlternateContent (an equation's text box) is read, from its
#                         mc:Choice, and a malformed part but the presentation part (a notes slide, a
#                         master, a slide) is left out and listed, not the deck failed (trial 17c);
#                         6: side-by-side shapes are read left column first (reading_order);
#                         5: a footer's and a date placeholder's text is read; 4: the text of charts
#                         (titles, axis titles, series names) and SmartArt graphics
MEDIA_TYPE = "application/vnd.openxmlformats-officedocument.presentationml.presentation"


def _parse(data, config, media_type):
    from fabric_resources.parsing.isolation import isolation_for, run_parser
    from fabric_resources.parsing.ooxml import declared_bytes

    return run_parser("fabric_resources.parsing.pptx.parser:parse_pptx", data, config, media_type,
                      isolation_for(declared_bytes(data), config))


SPEC = ParserSpec(
    name=PARSER_NAME,
    version=PARSER_VERSION,
    extensions={".pptx": MEDIA_TYPE},
    config_section="pptx",
    parse=_parse,
)
