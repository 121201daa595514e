"""The simulated clock: a small, domain-free discrete-event engine."""
