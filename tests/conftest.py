import pytest

from tests.helpers import context


@pytest.fixture(scope="session")
def generic_context():
    return context("generic")
