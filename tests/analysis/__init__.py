"""Tests of analysis/: reading run folders, the report's statistics, tables and plots."""
