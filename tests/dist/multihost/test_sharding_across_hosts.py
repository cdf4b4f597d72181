"""FSDP and tensor parallelism on 4 ranks over two hosts (two each): the same losses as one
process, eager and captured."""
import numpy as np
import pytest

import labkit as lk
from tests.distributed import gpt
from tests.distributed.on_ranks import train_on_ranks

pytestmark = [pytest.mark.dist, pytest.mark.multihost]
CFG = gpt.SMALL


@pytest.mark.parametrize("captured", [False, True], ids=["eager", "captured"])
@pytest.mark.parametrize("name", ["fsdp", "tensor_parallel", "fsdp_tp"])
def test_across_two_hosts_like_one_process(cluster4, name, captured):
    reference = gpt.train(lk, gpt.build(lk, CFG), CFG, 3)
    for losses in cluster4.run(train_on_ranks, name, CFG, 3, captured):
        np.testing.assert_allclose(losses, reference, rtol=1e-12)


@pytest.mark.parametrize("name", ["fsdp", "tensor_parallel"])
def test_w10_across_two_hosts(cluster4, name):
    """The GPT in W10's configuration, 10 steps, on 4 ranks over two hosts."""
    reference = gpt.train(lk, gpt.build(lk, gpt.W10), gpt.W10, 10)
    for losses in cluster4.run(train_on_ranks, name, gpt.W10, 10):
        np.testing.assert_allclose(losses, reference, rtol=1e-10)
