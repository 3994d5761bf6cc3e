"""The gate: spec, inputs, runner, comparison, timing, native and sanitizer evidence, the Verdict."""
