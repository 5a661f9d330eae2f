import sys

from lazyscope.cli import entry

sys.exit(entry())
