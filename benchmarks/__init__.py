"""Benchmarks of pallas-verify: overhead, compile reuse, detection, scaling, cost.

``make bench`` (``python -m benchmarks.run``) measures every figure side by side in one
run on this machine, prints a table and writes ``benchmarks/results.json``. Nothing here
is a timed test: figures are measured and reported, never asserted.
"""
