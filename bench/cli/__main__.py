"""`python -m roofbench.bench.cli`: the same entry point as the `roofbench` script."""

from roofbench.boundary import install_stop_handler

try:
    install_stop_handler()  # the one stop handler from the first import on (boundary.py)
    from . import main
except KeyboardInterrupt as e:  # nothing started yet: nothing to save
    import sys

    print(f"roofbench: stopped by {getattr(e, 'signame', 'SIGINT')}", file=sys.stderr)
    raise SystemExit(130) from None

raise SystemExit(main())
