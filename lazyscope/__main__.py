import sys

from lazyscope.cli import main

sys.exit(main())
