"""Rescoring stages over the fused candidates, in the order the pipeline runs them: ColBERT MaxSim
(:mod:`.maxsim`, with ``late_interaction``) then the reranker (:mod:`.rerank`, with a reranker
role). Each satisfies :class:`.base.RescoringStage`."""
