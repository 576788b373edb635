"""Real daemons as small classes: config generation, start in a node, readiness poll, stop."""
