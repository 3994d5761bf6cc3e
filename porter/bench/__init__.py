"""porter bench: ports over a suite of tasks, one row each, and the suite rates."""
