"""Cases of CosineSimilarity and PairwiseDistance."""
from ..module_cases import ModuleCase


def _pair(shape1, shape2):
    return lambda rng: (rng.standard_normal(shape1), rng.standard_normal(shape2))


MODULE_CASES = [
    ModuleCase("cosine_similarity", lambda nn: nn.CosineSimilarity(dim=-1), _pair((3, 5),
                                                                                   (3, 5))),
    ModuleCase("cosine_similarity_broadcast", lambda nn: nn.CosineSimilarity(dim=1),
               _pair((4, 3, 2), (1, 3, 2)), module="CosineSimilarity"),
    ModuleCase("pairwise_distance", lambda nn: nn.PairwiseDistance(), _pair((4, 6), (4, 6))),
    ModuleCase("pairwise_distance_p1", lambda nn: nn.PairwiseDistance(p=1.0, keepdim=True),
               _pair((4, 6), (4, 6)), module="PairwiseDistance"),
]
