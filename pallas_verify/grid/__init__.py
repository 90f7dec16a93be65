"""The static side: find pallas_calls, evaluate their grids, check and blame."""
