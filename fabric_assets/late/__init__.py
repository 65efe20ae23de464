"""Late interaction: ColBERT document matrices of the ColBERT windows (``colbert_matrices``)."""
