"""The HTTP API of a live service: the FastAPI app, auth, body limits, submissions."""
