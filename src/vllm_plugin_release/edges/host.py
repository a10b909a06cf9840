"""Facts about the machine a run happens on, for run records only (never for manifests)."""

from __future__ import annotations

import os
import platform
import socket
import sys


def facts() -> dict[str, object]:
    """Host name, platform, Python version and process id of this run."""
    return {
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "pid": os.getpid(),
    }
