"""A topology built inside one trial (a feature check, a router profile): its own namespaces,
torn down when the trial ends, whatever happens."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any


@contextmanager
def built(topology: str, overrides: Mapping[str, str] | None = None) -> Iterator[Any]:
    """Build the topology `topology` (a name in topologies/ or a path) as a separate run and
    yield its Testbed; MissingCapability propagates before anything is created."""
    from testbed.testbed import Testbed
    from testbed.topology import find_topology, load_topology

    topo = load_topology(find_topology(topology), dict(overrides or {}))
    with Testbed(topo) as tb:
        yield tb
