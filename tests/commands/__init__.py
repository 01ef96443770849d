"""Tests of the commands: evaluate, train's command line, play, export, bench, dashboard."""
