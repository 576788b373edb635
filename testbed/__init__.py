"""testbed: rebuild published IPv4/IPv6 network experiments in network namespaces."""

import os as _os
import sys as _sys

__version__ = "0.1.0"

if _sys.argv and _os.path.basename(_sys.argv[0]) == "testbed":
    # The `testbed` program: from its first line of our code on, Ctrl-C or SIGTERM ends it
    # with one line and 128+signal (nothing exists yet); testbed.signals takes over later.
    import signal as _signal

    def _starting(signum: int, frame: object) -> None:
        _os.write(2, b"testbed: interrupted while starting; nothing was created\n")
        _os._exit(128 + signum)

    _signal.signal(_signal.SIGINT, _starting)
    _signal.signal(_signal.SIGTERM, _starting)
