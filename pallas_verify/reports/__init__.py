"""Reports: the model (JSON is the source of truth), its renderings, reproducers."""
