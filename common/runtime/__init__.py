"""The actor-learner runtime: actors and the evaluator, the learner loop, the agent, run logs and
summaries."""
