"""The Markdown parser's name and version (they enter every parse ID) and its media type.

Their own module so that the parser and the plug-in's spec both read them without importing
each other (the spec loads the parser lazily).
"""

PARSER_NAME = "markdown"
PARSER_VERSION = "12"  # 12: the decoding of text v9: a stray NUL in legacy-encoded text (trial 23i); 11: a stray NUL reads as U+FFFD (CommonMark's rule), the decoding of text v8 (trial 22f);
#                         2: the text decoding of text v4 (trial 12a); 3: YAML front matter is not a heading;
#                         4: a table cell holding an escaped pipe is the cell, not its whole row (trial 12b);
#                         5: the text decoding of text v5 (EUC-JP, ISO-2022-JP, EUC-KR, Big5, ...; trial 13a);
#                         6: the text decoding of text v6 (windows-1250, ISO-8859-2, windows-1257; trial 14a);
#                         7: the text decoding of text v7 (trial 15a)
#                         8: TOML front matter (+++) is a front matter unit as YAML's is, both placed in metadata;
#                            HTML comments are no unit text (trial 18b)
#                         9: nor is what a script, style or template element holds (trial 22c)
#                         10: a footnote definition is a note unit where it stands, not lost as a link
#                             reference definition nor a paragraph holding its marker (trial 22c)
TEXT_MARKDOWN = "text/markdown"
