"""``python -m collectors``: see collectors/cli.py."""

from collectors.cli import main

raise SystemExit(main())
