"""Pure logic, no Django: statistics, sampling, pooling, file formats, scales, verdicts (issue #32: judgments/lib)."""
