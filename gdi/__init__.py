"""gdi package."""
