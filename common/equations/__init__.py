"""The equations: returns, distributional targets, policies, transforms, schedules, instruments and
score metrics, as pure functions."""
