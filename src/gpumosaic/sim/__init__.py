"""Event engine and the simulators that wire traces, policies, placements and sharing."""
