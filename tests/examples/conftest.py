import pytest
import torch


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    # the shared test machine is small; PyTorch's thread pool only fights the other processes
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
