"""Tests of search/: the Gumbel search against a literal tree search (tests/helpers/tree_search.py)."""
