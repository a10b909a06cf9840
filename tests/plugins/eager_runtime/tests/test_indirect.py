from eager_plugin.loader import load  # the runtime through loader -> kernels


def test_kernels_load():
    assert load()
