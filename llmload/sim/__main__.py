import sys

from llmload.sim.cli import main

sys.exit(main())
