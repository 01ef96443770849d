"""Tests of models/: stacked networks of a population and the per-member optimisers."""
