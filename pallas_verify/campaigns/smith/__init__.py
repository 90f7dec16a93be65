"""smith: random Pallas programs with derived references, run through every backend."""
