"""reactor package."""
