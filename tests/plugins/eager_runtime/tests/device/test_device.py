def test_device_table():
    from conftest import TABLE

    assert TABLE
