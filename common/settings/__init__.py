"""Settings: config fields with their help and checks, and the parts the papers' configs compose (no
TensorFlow)."""
