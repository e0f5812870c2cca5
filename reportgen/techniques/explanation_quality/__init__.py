"""Explanation quality over an evaluation set (the technique is declared below)."""
