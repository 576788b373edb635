"""Measurements: the kinds (kinds/, one module each), the tools' argv and parsers, the probes."""
