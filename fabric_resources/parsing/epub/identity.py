"""The epub parser's name and version (they enter every parse ID) and its media types.

Their own module so that the parser and the plug-in's spec both read them without importing
each other (the spec loads the parser lazily).
"""

PARSER_NAME = "epub"
PARSER_VERSION = "10"  # 10: a chapter in another encoding than UTF-8 (windows-1252, Shift_JIS, UTF-16) is cut as a UTF-8 one is, in its own encoding, and one Python cannot decode that libxml2 stops reading is listed unread cap-parser-limit, the rest of the book read, not failing the book (trial 24c); 9: an attribute value past libxml2's 10 MB limit in a chapter no longer fails the book cap-parser-limit: a data: URL is cut to its header, a value the walk does not read emptied, a style keeps its hiding declarations; another read one fails naming it, the HTML parser's rule (trial 23i); 8: the fallback content of video and audio (shown only by reading systems without media support) yields no text, as in HTML (trial 22f); 7: a MathML annotation (TeX source, annotation-xml) is not read after the equation it annotates (trial 20b); 6: a dialog not open yields no text (inline_style, as HTML; trial 19b); 4: a cell's col counts the rowspans of the rows above (table_grid); 5: an element an inline style hides yields no text, hidden="until-found" text is kept (inline_style, as HTML; trial 17c)
MEDIA_TYPE = "application/epub+zip"
