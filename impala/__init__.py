"""impala package."""
