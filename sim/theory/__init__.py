"""What the numbers should be without a simulation: closed forms, the pool's capacity, and the
statistics (intervals, rates) every comparison of a prediction with a run uses."""
