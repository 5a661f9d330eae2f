"""DataLoader(num_workers=2) with forked workers (see loader_workers.py)."""

from loader_workers import main

if __name__ == "__main__":
    main("fork")
