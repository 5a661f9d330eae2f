"""``python -m lazyscope_scenarios.decoder``: the decoder scenario (see the package docstring)."""

import sys

from lazyscope_scenarios.decoder.run import main

sys.exit(main())
