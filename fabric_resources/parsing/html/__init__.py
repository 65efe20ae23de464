"""HTML parser plug-in: lxml.html for the element walk, trafilatura for the main-text decision.

The parser is :mod:`.parser`. It runs in-process by default (trafilatura's import alone makes a
child ~0.8 s per page), except a page over ``parsers.html.subprocess_above_bytes``: that one runs in
a bounded child process (:mod:`fabric_resources.parsing.isolation`, the ``isolation`` section's
``timeout_s`` and ``max_memory_bytes``), because trafilatura's time grows faster than the page's
element count (400,000 paragraphs, 5.5 MB: 210 s) and nothing stops it in-process.
"""

from __future__ import annotations

from fabric_resources.parsing.spec import ParserSpec

PARSER_NAME = "html"
PARSER_VERSION = "39"  # 39: a select's size is read by the HTML Standard's rules for non-negative integers (3px, +3, thousands of digits: one crashed the parse, one past 10 MB was emptied, a list box read as a drop-down), and an option's label or text past libxml2's 10 MB limit reads as its first 10,000 characters, not failing the page (trial 24c); 38: a page of undeclared legacy encoding holding a stray NUL is read (the NUL ignored), not failing undecodable (trial 23i); 37: the option a select shows (a drop-down's selected one, a list box's) and the placeholder of an empty text box or textarea are read in their unit, out of the text matched against trafilatura's (trial 23d); 36: a button's label and the value an input shows (a text box, a submit button; not hidden, password, check box) are read in their unit (trial 22f); 35: an attribute value past libxml2's 10 MB limit no longer fails the page cap-parser-limit: one the parser does not read is emptied, a style keeps its hiding declarations, a frame's srcdoc is read whole; another read one fails naming it (trial 22f); 34: a data: URL payload past 64 KiB in an attribute (an embedded image) is cut before libxml2 reads the page, so one past its 10 MB attribute limit no longer fails the page cap-parser-limit (trial 22c); 33: a page declaring windows-1252 (or a Latin-1 or ASCII label) decodes as the standard does, its bytes undefined in cp1252 as C1 controls, not failing undecodable (trial 22c); 32: the blocks of an element read inline (a link holding a heading and a paragraph) are a line apart, not glued (trial 22c); 31: a font element is inline: a paragraph holding one is one unit, not cut at it (trial 22c); 30: the words either side of an hr, a legend, an xmp (blocks the walk does not split at) are a line apart, not glued (trial 22c); 29: the fallback content of video and audio (shown only by browsers without media support) yields no text (trial 22c); 28: a frame whose srcdoc document cannot be read (nested too deep where it stands, a libxml2 limit) is listed unread at its path and the rest of the page read, not the whole page failed cap-depth (trial 20e); 27: an iframe srcdoc or an svg sized zero as 0px, 0.0, 0% or by an inline width/height is not read, nor what a shadow root's hidden slot takes, nor what a nested shadow root's slots seemed to take of the outer host; a foreignObject's HTML is read by the walk's tag rule (no noscript, options, ruby readings; its shadow roots); what a srcdoc document holds after its </html> is read in the frame, and a shadow root on its body; frames in an inert template, noscript or unslotted take none of the 200-frame cap; the text after an embed (libxml2 reads it as a container) is read; an svg its own visibility or display attribute hides is not; a page nested 246-253 deep parses (trial 20e); 26: the document an iframe srcdoc shows is read where the frame stands, frames past 200 listed cap-frames (trial 20b); 25: the HTML of an inline SVG's foreignObject (diagram labels) is read (trial 20b); 24: blocks inside a custom element (any tag but a link) are units of their own, not one inline run (trial 20b); 23: a shadow root host's children no slot takes, a slot's fallback once filled, a shadow root on an element that may not host one are not read (trial 20b); 22: a block under font-size 0 keeps its text (a stylesheet may size it by tag; trial 20b); 21: a page whose html or body an inline style or hidden hides is read, an SVG text a zero font-size attribute hides is not (trial 20b); 20: text an inline font-size of zero makes invisible is not read (trial 20b); 19: a declarative shadow root (template shadowrootmode), an object's shown fallback, a textarea's default text and an inline SVG's text are read (trial 20b); 18: a dialog not open, noframes, noembed and datalist yield no text, an equation (MathML) is read in its unit, bytes holding ISO-2022-JP escapes decode as ISO-2022-JP (trial 19b); 17: content after </html> is read at the end of the body, as browsers show it (trial 17c); 9: UTF-8 but for a flaw reads as UTF-8, bad bytes replaced (trial 12a); 10: short elements over
#                          several lines kept; 11: ruby readings are not unit text (trial 12b); 12: a page declaring
#                          no charset decodes as text v5 does (EUC-JP, ISO-2022-JP, EUC-KR, Big5, KOI8-R, ...);
#                          13: ... as text v6 does (windows-1250, ISO-8859-2, windows-1257; trial 14a);
#                          14: a cell's col is its grid column (colspan, rowspan), rows are the table's own;
#                          15: MediaWiki's "[edit]" link is not heading text (trial 14c);
#                          16: a page declaring no charset decodes as text v7 does (trial 15a)
MEDIA_TYPE = "text/html"


def _parse(data, config, media_type):
    from fabric_resources.parsing.isolation import isolation_for, run_parser

    return run_parser("fabric_resources.parsing.html.parser:parse_html", data, config, media_type,
                      isolation_for(len(data), config))


SPEC = ParserSpec(
    name=PARSER_NAME,
    version=PARSER_VERSION,
    extensions={".html": MEDIA_TYPE, ".htm": MEDIA_TYPE},
    config_section="html",
    parse=_parse,
)
