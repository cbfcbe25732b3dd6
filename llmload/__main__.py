from llmload.cli import main

raise SystemExit(main())
