"""devenv layer."""
