def pytest_configure(config):
    config.addinivalue_line("markers", "world: needs the test world (docker + locally built images)")
