"""testbed: rebuild published IPv4/IPv6 network experiments in network namespaces."""

__version__ = "0.1.0"
