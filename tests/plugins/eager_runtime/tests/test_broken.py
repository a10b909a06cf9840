from eager_plugin.missing_module import helper  # a plain bug: not the runtime


def test_helper():
    assert helper()
