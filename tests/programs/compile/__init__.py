"""Small user-style scripts that show torch.compile pitfalls (run them by path, any backend)."""
