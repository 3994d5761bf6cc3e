"""The review branch and its PORT_REPORT.md."""
