import eager_sdk  # imported at import time: collection fails without the runtime


def test_custom_ops_registered():
    assert eager_sdk.ops()
