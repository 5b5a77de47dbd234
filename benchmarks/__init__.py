"""Benchmarks: each prints its figures and ratios; none asserts on time."""
