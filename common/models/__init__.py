"""Models: the networks' torsos, LSTM cores and heads."""
