"""Terminal rendering of verdicts, inspections, ports and the doctor."""
