"""The epub parser's name and version (they enter every parse ID) and its media types.

Their own module so that the parser and the plug-in's spec both read them without importing
each other (the spec loads the parser lazily).
"""

PARSER_NAME = "epub"
PARSER_VERSION = "4"  # 4: a cell's col counts the rowspans of the rows above (table_grid)
MEDIA_TYPE = "application/epub+zip"
