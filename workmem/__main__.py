"""``python -m workmem``: the ``workmem`` command, for when its console script is not on ``PATH``."""

import sys

from workmem.cli import main

sys.exit(main())
