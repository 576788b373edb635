"""Measurement runners: each builds argv for a real tool (or a built-in probe) and parses it."""
