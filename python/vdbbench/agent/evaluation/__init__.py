"""Evaluation and the judge: candidate processes, timing, the query splits, the accept-or-reject decision, the audit, the reference line, transfer targets and the final measurement."""
