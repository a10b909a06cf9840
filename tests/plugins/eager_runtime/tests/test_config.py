def test_platform_is_inactive_without_the_runtime():
    from eager_plugin import register

    assert register() is None
