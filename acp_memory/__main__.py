from acp_memory.cli import main

raise SystemExit(main())
