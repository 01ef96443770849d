"""Tests of population/: the population block, its members and the files it writes."""
