"""Retrieval channels over one pinned release, behind one protocol (:mod:`.base`), in one
ordered registry (:mod:`.registry`): ``word`` and ``substring`` (:mod:`.lexical`), ``scan``
(:mod:`.scan`, their fallback), ``dense`` and ``dense_multilingual`` (:mod:`.dense`), ``graph``
(:mod:`.graph`)."""
