from knowmind.cli import main

raise SystemExit(main())
