"""The shipped-inventories check runs site.yml --check against a simulated host: docker, root and the test world."""


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "molecule: needs docker, root and the test world images (tests/run-all molecule phase)"
    )
