"""What every layer may use and that imports nothing of lazyscope's: errors and exit codes,
units, plain values, lazyscope's own streams, signal handling, padding policies."""
