"""Population based training (IMPALA App. F) on Ray Tune: the rules, a member, the scheduler."""
