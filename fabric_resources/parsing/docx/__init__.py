"""DOCX parser plug-in (python-docx, plus the footnote, endnote, comment, header and footer parts it reads no text of).

The parser is :mod:`.parser`. It runs in-process (``parsers.docx.isolation``), except a package
whose members declare more than ``parsers.docx.subprocess_above_bytes`` (uncompressed): lxml
holds the whole part's tree, many times its size, so that one runs in a bounded child process
(:mod:`fabric_resources.parsing.isolation`: ``isolation``'s ``timeout_s`` and ``max_memory_bytes``).
"""

from __future__ import annotations

from fabric_resources.parsing.spec import ParserSpec

PARSER_NAME = "docx"
PARSER_VERSION = "25"  # 25: a header or footer locator says the sections (of several) and the pages (first, even, odd) that show it, and a review comment marking a cell, a header, a footer or a note names that place (marked_in), so each is cited where it stands (trial 24c), and an HTML w:altChunk reads as html parser 39 reads it (a select's size, a long option); 24: the words of VML WordArt (v:textpath: a watermark in a header) are read (trial 23d); 23: a note or comment whose mark stands where no text is (an empty paragraph, a line of marks alone) is read, each mark at its place, and notes of one w:id are one unit (trial 23d); 22: the header and footer parts a section shows are note units, note_type header / footer, each distinct part once, a part of another root (the main part named as a header) listed unread (trial 23d); 21: review comments (word/comments.xml) whose reference mark is shown are note units, note_type comment, linked by note_ref (trial 22g); 20: a comment or processing instruction inside a w:t, an m:t or a chart's cached c:v cuts none of its text (trial 22g); 19: SmartArt and charts in table cells and foot/endnotes are read (trial 22d); 18: a field's code that runs into later paragraphs is no text there either (trial 22d); 17: a part declaring a DTD is left out and listed, the main part failing the document, not read with its entity references cut (OPC M1.18; trial 22c); 16: a package holding two parts of one name fails malformed-docx (OPC M1.12; trial 22c); 4: a part a relationship names may be missing (missing-part); 5: w:noBreakHyphen is U+2011
# 6: text a tracked change moved away (w:moveFrom) is skipped as deleted text is; 7: one branch of an
# mc:AlternateContent is read (a text box's text was read twice); 8: a ruby's reading (w:rt) is skipped;
# 9: an absolute position tab (w:ptab) is a tab, not nothing; 10: rows, cells and paragraphs inside content
# controls or custom XML are read, a w:hMerge continuation cell once, and text the default paragraph style
# or the document defaults hide is skipped, a field nested in a field's code is no text, a malformed part but
# the document part (docProps/core.xml, word/settings.xml) is left out and listed, not the file failed, and a
# note no shown reference marks (deleted, hidden, none) is not read, an imported w:altChunk is listed unread (trial 17c)
# 11: an equation's text (OMML m:t) and a symbol (w:sym) are read, an imported HTML or text part (w:altChunk) is read
# in place, a malformed styles part is read by lxml's recovering parser so its hiding and headings apply (trial 18b)
# 12: a style hides through a w:basedOn chain of any length (it stopped after 32 steps), an external w:altChunk
# is listed with its target, not python-docx's error, an equation where a table cell's or a note's paragraph may
# stand is read, a note's text-box paragraph once, an MHTML w:altChunk is read from its root HTML part (trial 19b)
# (and an HTML w:altChunk reads as html parser 18 reads it: no closed dialog, noframes, noembed, datalist; MathML read)
# 13: an HTML w:altChunk reads as html parser 26 reads it (a shadow root, an object's fallback, a textarea, SVG text
# read; text under font-size 0 not), a part nested past libxml2's depth is listed cap-depth (trial 20b)
# 14: a body unit's locator names the main part by its own name (a package may call it word/main.xml) (trial 21e)
# 15: the words of a SmartArt graphic or a chart in a body paragraph are a unit after it, located by its part
# (trial 21e)
# 16: a field's code that runs into later paragraphs (an IF field's text holding a paragraph mark) is not read
# there either: the fields open at each paragraph's start are settled over the story (fields.py) (trial 22d)
# 17: the words of a SmartArt graphic or a chart in a table cell or a footnote / endnote are a unit after the
# cell's or the note's text, located by its part, its paragraph and the cell or note (trial 22d)
MEDIA_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


def _parse(data, config, media_type):
    from fabric_resources.parsing.isolation import isolation_for, run_parser
    from fabric_resources.parsing.ooxml import declared_bytes

    return run_parser("fabric_resources.parsing.docx.parser:parse_docx", data, config, media_type,
                      isolation_for(declared_bytes(data), config))


SPEC = ParserSpec(
    name=PARSER_NAME,
    version=PARSER_VERSION,
    extensions={".docx": MEDIA_TYPE},
    config_section="docx",
    parse=_parse,
)
