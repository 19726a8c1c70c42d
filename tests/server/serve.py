"""``python -m tests.server.serve '<store spec as JSON>'``: the examples' server, for process tests."""

import json
import sys

from tests.server.harness import run_forever

if __name__ == "__main__":
    run_forever(json.loads(sys.argv[1]))
