"""Cases of Embedding (padding_idx, scale_grad_by_freq) and EmbeddingBag (sum, mean, max;
offsets or 2-d input; padding_idx; per-sample weights)."""
import numpy as np

from ..module_cases import ModuleCase, ints


def _bag_input(rng):
    return rng.integers(0, 7, 9), np.array([0, 3, 3, 7])


MODULE_CASES = [
    ModuleCase("embedding_padding", lambda nn: nn.Embedding(8, 3, padding_idx=2),
               lambda rng: np.array([[2, 1, 2], [5, 2, 7]]), module="Embedding"),
    ModuleCase("embedding_freq", lambda nn: nn.Embedding(6, 4, scale_grad_by_freq=True,
                                                         padding_idx=-1),
               ints((4, 5), 6), module="Embedding"),
    ModuleCase("embedding_bag_mean", lambda nn: nn.EmbeddingBag(7, 3), _bag_input,
               module="EmbeddingBag"),
    ModuleCase("embedding_bag_sum_2d", lambda nn: nn.EmbeddingBag(7, 3, mode="sum",
                                                                  padding_idx=0),
               ints((4, 5), 7), module="EmbeddingBag"),
    ModuleCase("embedding_bag_max", lambda nn: nn.EmbeddingBag(7, 3, mode="max",
                                                               padding_idx=3), _bag_input,
               module="EmbeddingBag"),
    ModuleCase("embedding_bag_last_offset", lambda nn: nn.EmbeddingBag(
        7, 2, mode="mean", include_last_offset=True),
        lambda rng: (rng.integers(0, 7, 6), np.array([0, 2, 2, 6])), module="EmbeddingBag"),
    ModuleCase("embedding_bag_weights", lambda nn: nn.EmbeddingBag(7, 3, mode="sum"),
               lambda rng: (rng.integers(0, 7, 6), np.array([0, 4]),
                            rng.standard_normal(6)), module="EmbeddingBag"),
]
