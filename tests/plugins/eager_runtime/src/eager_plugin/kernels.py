"""Kernel table: needs the runtime as soon as it is imported."""

import eager_sdk  # the runtime, at import time

TABLE = eager_sdk.kernel_table()
