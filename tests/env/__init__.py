"""Tests of env/: the engine, the solver, opponents, random streams, the gymnasium adapter."""
