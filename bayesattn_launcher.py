"""The ``bayesattn`` command's entry point: it installs the interrupt handling before anything heavy is imported.

Importing ``bayesattn`` imports JAX, which takes a second or more; a Ctrl-C in that time would otherwise end
the import with a KeyboardInterrupt traceback. Until ``bayesattn.cli.main`` installs its own handling
(``bayesattn.sweep.exit_on_interrupt``), SIGINT / SIGTERM end the process at once with status 130 / 143: no
work has started, so nothing can be lost.
"""

import os
import signal
import sys


def main() -> int:
    signal.signal(signal.SIGINT, lambda *_: os._exit(130))
    signal.signal(signal.SIGTERM, lambda *_: os._exit(143))
    from bayesattn.cli import main as cli_main

    return cli_main()


if __name__ == "__main__":
    sys.exit(main())
