"""``Embedding``: a lookup table of trainable vectors indexed by integers."""
from ..tensor.creation import zeros
from . import functional as F
from . import init
from .module import Module
from .parameter import Parameter


class Embedding(Module):
    """A table of ``num_embeddings`` vectors of size ``embedding_dim``, drawn from N(0, 1) as in
    PyTorch. Integer indices of any shape give vectors of shape (*indices, embedding_dim).
    The row at ``padding_idx`` (if given) starts at zero and receives no gradient.

    >>> import labkit as lk
    >>> emb = lk.nn.Embedding(10, 3)
    >>> emb(lk.tensor([[1, 2], [3, 4]])).shape
    (2, 2, 3)
    """

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, device=None, dtype=None):
        super().__init__()
        self.num_embeddings = int(num_embeddings)
        self.embedding_dim = int(embedding_dim)
        if padding_idx is not None:
            if not -self.num_embeddings <= padding_idx < self.num_embeddings:
                raise ValueError(f"Embedding: padding_idx={padding_idx} is outside the table of "
                                 f"{self.num_embeddings} rows")
            padding_idx %= self.num_embeddings
        self.padding_idx = padding_idx
        self.weight = Parameter(zeros((self.num_embeddings, self.embedding_dim), dtype=dtype,
                                      device=device))
        self.reset_parameters()

    def reset_parameters(self):
        """Redraw the table from N(0, 1); the padding row (if any) is set to zero."""
        init.normal_(self.weight)
        if self.padding_idx is not None:
            self.weight._data[self.padding_idx] = 0

    def forward(self, indices):
        return F.embedding(indices, self.weight, self.padding_idx)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        return s
