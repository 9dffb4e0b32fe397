"""Evaluation: the packs in force, each round's evaluation, evaluator health and metrics."""
