"""controllers layer."""
