"""Tests of algos/: the base bookkeeping and each algorithm's update."""
