"""Facts about the machine a run happens on, for run records only (never for manifests)."""

from __future__ import annotations

import os
import platform
import socket
import sys
from typing import NamedTuple


class HostFacts(NamedTuple):
    """This run's host name, platform, Python version and process id (run.json only)."""

    host: str
    platform: str
    python: str
    pid: int

    def to_json(self) -> dict[str, str | int]:
        """The keys run.json has always held, in their order."""
        return {
            "host": self.host,
            "platform": self.platform,
            "python": self.python,
            "pid": self.pid,
        }


def facts() -> HostFacts:
    """Host name, platform, Python version and process id of this run."""
    return HostFacts(socket.gethostname(), platform.platform(), sys.version.split()[0], os.getpid())
