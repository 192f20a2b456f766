import pytest
import torch

from tests.train.helpers import write_corpus


@pytest.fixture(scope="session")
def corpus(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("corpus") / "corpus.txt")


@pytest.fixture(autouse=True)
def one_thread(request):
    """Tiny models run fastest on one thread (and the machine is shared); slow tests, which
    train real models, keep torch's thread count."""
    if request.node.get_closest_marker("slow"):
        yield
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
