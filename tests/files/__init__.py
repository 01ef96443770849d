"""Tests of files/: atomic outputs."""
