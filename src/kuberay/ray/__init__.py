"""ray layer."""
