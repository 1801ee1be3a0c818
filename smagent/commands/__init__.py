"""Command groups of the `smagent` CLI that live outside smagent.cli (registered there)."""
