"""The cross-document entity graph: pure row building (``build``); its assets live in ``fabric_assets.annotations``."""
