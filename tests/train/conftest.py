import pytest

from tests.train.helpers import write_corpus


@pytest.fixture(scope="session")
def corpus(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("corpus") / "corpus.txt")


@pytest.fixture(autouse=True)
def _every_training_test_on_one_thread(one_thread):
    """See tests/conftest.py: one_thread."""
