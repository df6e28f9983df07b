"""Shared, framework-neutral library of the benchmark: specs, data format, clock, run record."""
