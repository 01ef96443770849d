"""Tests of baselines/: the SB3 comparison (the antirez baseline runs through bench)."""
