"""``python -m ctxd`` runs the CLI."""

from ctxd.cli import main

raise SystemExit(main())
