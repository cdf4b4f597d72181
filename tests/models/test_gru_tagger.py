"""A 2-layer bidirectional GRU tagger trained step for step with PyTorch (see lockstep.py) on
padded batches of token sequences of varied lengths, with ``CrossEntropyLoss(ignore_index=)``
skipping the padding and Adam.

The tagging rule needs both directions: a token's tag says whether it is in the lower half of the
vocabulary and whether the token after it is larger than the token before it. The GRU reads the
batch either packed (``pack_padded_sequence`` / ``pad_packed_sequence``, so each direction sees
only the real steps) or padded (the padding read too, its outputs ignored by the loss)."""
import numpy as np
import pytest

from .lockstep import lockstep

VOCAB, TAGS, EMBED, HIDDEN, MAX_LEN, BATCH, STEPS = 20, 4, 12, 16, 12, 8, 30
PAD, PAD_TAG = 0, TAGS
# packing sorts the batch by length, and lk.function retraces for new lengths (a Python list):
# the packed variant's batches all have these lengths, in this order
PACKED_LENGTHS = [7, 12, 3, 9, 12, 5, 10, 4]


def make_tagger(torch):
    nn = torch.nn
    rnn = torch.nn.utils.rnn

    class Tagger(nn.Module):
        def __init__(self, vocab, n_tags, embed, hidden):
            super().__init__()
            self.embedding = nn.Embedding(vocab, embed, padding_idx=PAD)
            self.gru = nn.GRU(embed, hidden, num_layers=2, bidirectional=True,
                              batch_first=True)
            self.out = nn.Linear(2 * hidden, n_tags)

        def forward(self, tokens, lengths=None):
            x = self.embedding(tokens)
            if lengths is None:
                h, _ = self.gru(x)
            else:
                packed = rnn.pack_padded_sequence(x, lengths, batch_first=True,
                                                  enforce_sorted=False)
                h, _ = self.gru(packed)
                h, _ = rnn.pad_packed_sequence(h, batch_first=True,
                                               total_length=tokens.size(1))
            return self.out(h)

    return Tagger(VOCAB, TAGS, EMBED, HIDDEN)


def optimize(torch, model):
    return torch.optim.Adam(model.parameters(), lr=0.01), None


def loss_of(torch, model, tokens, tags, lengths=None):
    criterion = torch.nn.CrossEntropyLoss(ignore_index=PAD_TAG)
    logits = model(tokens, lengths)
    return criterion(logits.view(-1, logits.size(-1)), tags.view(-1))


def tag(tokens):
    """Tags of one sequence (no padding): 2 * (token in the lower half) + (next > previous),
    the missing neighbours at the ends counting as 0."""
    padded = np.concatenate([[0], tokens, [0]])
    return 2 * (tokens < VOCAB // 2) + (padded[2:] > padded[:-2])


def batches(packed, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(STEPS):
        lengths = PACKED_LENGTHS if packed else rng.integers(2, MAX_LEN + 1, BATCH).tolist()
        tokens = np.full((BATCH, MAX_LEN), PAD, dtype=np.int64)
        tags = np.full((BATCH, MAX_LEN), PAD_TAG, dtype=np.int64)
        for b, n in enumerate(lengths):
            tokens[b, :n] = rng.integers(1, VOCAB, n)
            tags[b, :n] = tag(tokens[b, :n])
        out.append((tokens, tags, list(lengths)) if packed else (tokens, tags))
    return out


@pytest.mark.parametrize("packed", [True, False], ids=["packed", "padded"])
def test_bidirectional_gru_tagger_trains_step_for_step_with_pytorch(packed, device):
    lockstep(make_tagger, optimize, loss_of, batches(packed), device=device)
