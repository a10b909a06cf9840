from eager_plugin.safe import available  # guards its runtime import


def test_runtime_is_reported_absent():
    assert available() is False
