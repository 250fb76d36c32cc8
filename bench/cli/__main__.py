"""`python -m roofbench.bench.cli`: the same entry point as the `roofbench` script."""

from . import main

raise SystemExit(main())
