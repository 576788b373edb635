"""Configuration text and argv of the programs features run (pure: they start nothing)."""
