"""Oracles: outcomes (and the reference's outputs) -> findings."""
