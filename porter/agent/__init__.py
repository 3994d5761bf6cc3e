"""The agent loop: the model client, agents and prompts, edit formats, feedback, the session, run records."""
