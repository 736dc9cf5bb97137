"""schedulers layer."""
