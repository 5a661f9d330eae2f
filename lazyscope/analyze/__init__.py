"""Analyzers: small pure functions, one question each, Run -> data. No I/O, no printing."""
