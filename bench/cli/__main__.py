"""`python -m roofbench.bench.cli`: the same entry point as the `roofbench` script."""

try:
    from . import main
except KeyboardInterrupt:  # Ctrl-C while Python imports the command line: nothing started
    import sys

    print("roofbench: stopped by SIGINT", file=sys.stderr)
    raise SystemExit(130) from None

raise SystemExit(main())
