"""Marks a failed browser test on its item, so the fixture that opened its notebooks saves screenshots."""
import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if outcome.get_result().failed:
        item.failed = True
