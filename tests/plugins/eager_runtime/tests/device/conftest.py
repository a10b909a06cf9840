import device_helpers  # a helper next to the tests that imports eager_plugin.kernels

TABLE = device_helpers.table()
