from tenantry.cli import main

raise SystemExit(main())
