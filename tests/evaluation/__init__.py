"""Tests of evaluation/: the exact evaluator against the reference, and the statistics."""
