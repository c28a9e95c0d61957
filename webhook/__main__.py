from webhook.commands.cli import main

raise SystemExit(main())
