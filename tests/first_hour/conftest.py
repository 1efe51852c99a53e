"""The first-hour test needs docker, root and the test world: tests/run-all runs it in its molecule phase."""


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "molecule: needs docker, root and the test world images (tests/run-all molecule phase)"
    )
