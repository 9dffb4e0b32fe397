"""LLM judges: the `judge` rules of the packs, called beside the pipeline."""
