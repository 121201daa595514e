"""Applications over placement and the share lock: the Kubernetes scheduler extender."""
