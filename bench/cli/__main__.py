"""`python -m roofbench.bench.cli`: the same entry point as the `roofbench` script."""

import signal

from roofbench.boundary import Stopped


def _early_stop(signum: int, frame: object) -> None:  # until main() installs its own
    raise Stopped(signal.Signals(signum).name)


try:
    signal.signal(signal.SIGTERM, _early_stop)  # a stop while Python imports the command line
    signal.signal(signal.SIGHUP, _early_stop)
    from . import main
except KeyboardInterrupt as e:  # nothing started yet: nothing to save
    import sys

    print(f"roofbench: stopped by {getattr(e, 'signame', 'SIGINT')}", file=sys.stderr)
    raise SystemExit(130) from None

raise SystemExit(main())
