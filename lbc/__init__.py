"""lbc package."""
