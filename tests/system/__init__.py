"""Cross-cutting tests: crash and resume, fault injection, hostile inputs across the engine and
the command lines, packaging, a busy host."""
