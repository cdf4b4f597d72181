"""``Embedding`` and ``EmbeddingBag``: lookup tables of trainable vectors indexed by integers,
initialised from N(0, 1) as in PyTorch."""
from ..errors import ShapeError
from ..tensor.creation import zeros
from . import functional as F
from . import init
from .module import Module
from .parameter import Parameter


class _Table(Module):
    """The weight table and the options Embedding and EmbeddingBag share."""

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None,
                 norm_type=2.0, scale_grad_by_freq=False, sparse=False, _weight=None,
                 _freeze=False, device=None, dtype=None):
        super().__init__()
        self.num_embeddings = int(num_embeddings)
        self.embedding_dim = int(embedding_dim)
        if padding_idx is not None:
            if not -self.num_embeddings <= padding_idx < self.num_embeddings:
                raise ValueError(f"{type(self).__name__}: padding_idx={padding_idx} is outside "
                                 f"the table of {self.num_embeddings} rows")
            padding_idx %= self.num_embeddings
        self.padding_idx = padding_idx
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.sparse = sparse
        if _weight is None:
            self.weight = Parameter(zeros((self.num_embeddings, self.embedding_dim),
                                          dtype=dtype, device=device), requires_grad=not _freeze)
            self.reset_parameters()
        else:
            if tuple(_weight.shape) != (self.num_embeddings, self.embedding_dim):
                raise ShapeError(f"{type(self).__name__}: _weight has shape {_weight.shape}, "
                                 f"expected ({self.num_embeddings}, {self.embedding_dim})")
            self.weight = Parameter(_weight, requires_grad=not _freeze)

    def reset_parameters(self):
        """Redraw the table from N(0, 1); the padding row (if any) is set to zero."""
        init.normal_(self.weight)
        if self.padding_idx is not None:
            self.weight._data[self.padding_idx] = 0

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, **kwargs):
        """A table holding ``embeddings`` (2-d), trained only if ``freeze=False``.

        >>> import labkit as lk
        >>> emb = lk.nn.Embedding.from_pretrained(lk.tensor([[1.0, 2.0], [3.0, 4.0]]))
        >>> emb(lk.tensor([1])).tolist(), emb.weight.requires_grad
        ([[3.0, 4.0]], False)
        """
        if embeddings.ndim != 2:
            raise ShapeError(f"from_pretrained: embeddings must be 2-d, got shape "
                             f"{embeddings.shape}")
        rows, dim = embeddings.shape
        return cls(rows, dim, _weight=embeddings, _freeze=freeze, **kwargs)

    def _options_repr(self):
        s = ""
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm}"
        if self.norm_type != 2:
            s += f", norm_type={self.norm_type}"
        if self.scale_grad_by_freq is not False:
            s += f", scale_grad_by_freq={self.scale_grad_by_freq}"
        return s


class Embedding(_Table):
    """A table of ``num_embeddings`` vectors of size ``embedding_dim``. Integer indices of any
    shape give vectors of shape (*indices, embedding_dim). The row at ``padding_idx`` (if
    given) starts at zero and receives no gradient; ``max_norm`` renormalises the rows read.

    >>> import labkit as lk
    >>> emb = lk.nn.Embedding(10, 3, padding_idx=0)
    >>> emb(lk.tensor([[1, 2], [3, 0]])).shape, emb
    ((2, 2, 3), Embedding(10, 3, padding_idx=0))
    """

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None,
                 norm_type=2.0, scale_grad_by_freq=False, sparse=False, _weight=None,
                 _freeze=False, device=None, dtype=None):
        super().__init__(num_embeddings, embedding_dim, padding_idx, max_norm, norm_type,
                         scale_grad_by_freq, sparse, _weight, _freeze, device, dtype)

    def forward(self, input):
        return F.embedding(input, self.weight, self.padding_idx, self.max_norm, self.norm_type,
                           self.scale_grad_by_freq, self.sparse)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        s += self._options_repr()
        return s + (", sparse=True" if self.sparse else "")


class EmbeddingBag(_Table):
    """Sums, means (default) or maxima of bags of embeddings, without building the
    intermediate (*, L, dim) tensor's gradient per bag: ``forward(input, offsets=None,
    per_sample_weights=None)`` with a 2-d input (one bag per row) or a 1-d input cut at
    ``offsets``.

    >>> import labkit as lk
    >>> bag = lk.nn.EmbeddingBag(10, 3, mode="sum")
    >>> bag(lk.tensor([1, 2, 4, 5, 4]), lk.tensor([0, 2])).shape
    (2, 3)
    """

    def __init__(self, num_embeddings, embedding_dim, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, mode="mean", sparse=False, _weight=None,
                 include_last_offset=False, padding_idx=None, device=None, dtype=None):
        super().__init__(num_embeddings, embedding_dim, padding_idx, max_norm, norm_type,
                         scale_grad_by_freq, sparse, _weight, False, device, dtype)
        self.mode = mode
        self.include_last_offset = include_last_offset

    def forward(self, input, offsets=None, per_sample_weights=None):
        return F.embedding_bag(input, self.weight, offsets, self.max_norm, self.norm_type,
                               self.scale_grad_by_freq, self.mode, self.sparse,
                               per_sample_weights, self.include_last_offset, self.padding_idx)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}" + self._options_repr()
        s += f", mode={self.mode!r}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        return s
