"""Subcommands of the `testbed` command, one module per group."""
