"""The text parser's name and version (they enter every parse ID) and its media type.

Their own module so that the parser and the plug-in's spec both read them without importing
each other (the spec loads the parser lazily).
"""

PARSER_NAME = "text"
PARSER_VERSION = "9"  # 9: a stray NUL in text that is not UTF-8 (Shift_JIS, windows-1252, ...) reads as U+FFFD,
#                        the encoding detected as if it were not there (trial 23i); 8: a stray NUL in UTF-8 text (one per started 100 characters, counted with the other
#                        controls) reads as U+FFFD, not failing the file undecodable (trial 22f); 4: damaged UTF-8 fails, a stray control per started 100 characters (trial 12a);
#                        5: EUC-JP, ISO-2022-JP, EUC-KR (trial 13a), Big5, the non-Latin code pages and
#                        windows-1254 (trial 13a) read as such (were mojibake or undecodable);
#                        6: windows-1250 / ISO-8859-2 and windows-1257 / ISO-8859-13 (trial 14a; were
#                        windows-1252 or GB18030 mojibake, or undecodable), and a line under 64 bytes
#                        in a Cyrillic, Greek, Hebrew or Arabic page (was undecodable or katakana);
#                        7 (trial 15a): a Cyrillic, Greek, Hebrew or Arabic page is read only where its
#                        reading is written and spelt as words (random bytes read as Russian or Greek);
#                        Estonian, Lithuanian, Latvian whose windows-1252 reading holds ð þ read as
#                        windows-1257; Romanian in ISO-8859-16 where its bytes say so; a word alone such
#                        as Łódź in windows-1250 / ISO-8859-2; 8-bit text behind a UTF-16 BOM is undecodable
TEXT_PLAIN = "text/plain"
