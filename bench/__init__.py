"""Benchmarks: each writes JSON to bench/results/ and compares side by side in one run."""
