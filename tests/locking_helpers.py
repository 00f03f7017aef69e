"""A process holding an output directory's lock, for the tests of refusal and takeover."""

import os
import subprocess
import sys

HOLD = (
    "import sys, time\nfrom albert_tf.locking import OutputDirLock\n"
    "with OutputDirLock(sys.argv[1]):\n    print('held', flush=True)\n    time.sleep(600)\n"
)


def hold_lock(directory):
    """A process that holds the lock of `directory` until killed (returns once it holds it)."""
    process = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(directory)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    )
    assert process.stdout.readline().strip() == "held"  # blocks until the lock is taken: no timing involved
    return process
