"""attention layer."""
