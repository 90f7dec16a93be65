"""Campaigns over many kernels: fuzz, conformance, the failure database."""
