from tenantry.cli.main import main

raise SystemExit(main())
