"""``python -m pausepoint``: the ``pausepoint`` command (see ``pausepoint.cli``)."""

import sys

from pausepoint.cli import main

if __name__ == "__main__":
    sys.exit(main())
