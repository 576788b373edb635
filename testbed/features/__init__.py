"""Features set up on a built testbed (placeholder until the feature registry lands)."""
