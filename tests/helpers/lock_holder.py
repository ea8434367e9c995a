"""A second process that holds a file's write lock (``flock``): ``python tests/helpers/lock_holder.py PATH SECONDS``.

It prints ``locked`` once it holds the lock, then keeps it for SECONDS (or until killed).  The tests of
the store and of the daemon run it to stand for another writer that keeps the lock.
"""

from __future__ import annotations

import fcntl
import sys
import time
from pathlib import Path

SCRIPT = str(Path(__file__).resolve())

if __name__ == "__main__":
    with open(sys.argv[1], "ab") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        print("locked", flush=True)
        time.sleep(float(sys.argv[2]))
