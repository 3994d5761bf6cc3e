"""porter ci, the pre-merge bot: plan, check, port, and its reports."""
