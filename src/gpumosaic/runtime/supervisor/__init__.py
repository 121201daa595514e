"""The process supervisor: what an exit means, lost and returned nodes."""
