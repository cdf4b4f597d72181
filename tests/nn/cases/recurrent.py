"""Cases of the recurrent layers and cells: RNN (tanh, relu), LSTM (proj_size), GRU; several
layers, both directions, batch-first, unbatched, initial states, packed sequences (sorted and
not), and RNNCell / LSTMCell / GRUCell."""
from ..module_cases import ModuleCase, normal
from .calls import wrapped


def with_states(*shapes):
    """Inputs: x of ``shapes[0]`` then initial states of the other shapes."""
    return lambda rng: tuple(rng.standard_normal(s) for s in shapes)


def lstm_pair(nn, m, x, h0, c0):
    return m(x, (h0, c0))


LENGTHS = [3, 5, 1, 5]           # not sorted, with a tie: enforce_sorted=False sorts them


def packed(batch_first=False, lengths=LENGTHS, sort=False, pair=False):
    """Pack a padded batch, run the layer, unpack: (padded output, lengths, final states)."""
    def call(nn, m, x, *states):
        rnn = nn.utils.rnn
        p = rnn.pack_padded_sequence(x, lengths, batch_first=batch_first,
                                     enforce_sorted=sort)
        hx = (tuple(states) if pair else states[0]) if states else None
        out, h = m(p, hx)
        padded, lens = rnn.pad_packed_sequence(out, batch_first=batch_first,
                                               total_length=x.shape[1 if batch_first else 0])
        return padded, lens, h
    return call


MODULE_CASES = [
    ModuleCase("rnn_tanh_bidirectional_h0",
               lambda nn: nn.RNN(3, 4, num_layers=2, bidirectional=True),
               with_states((5, 2, 3), (4, 2, 4))),
    ModuleCase("rnn_relu_batch_first_no_bias",
               lambda nn: nn.RNN(3, 4, nonlinearity="relu", bias=False, batch_first=True),
               normal((2, 5, 3))),
    ModuleCase("rnn_unbatched", lambda nn: nn.RNN(3, 4, num_layers=2), with_states((5, 3),
                                                                                    (2, 4))),
    ModuleCase("lstm_bidirectional_two_layers",
               wrapped(lambda nn: nn.LSTM(3, 5, num_layers=2, bidirectional=True), lstm_pair),
               with_states((6, 2, 3), (4, 2, 5), (4, 2, 5)), module="LSTM"),
    ModuleCase("lstm_proj_size_batch_first",
               lambda nn: nn.LSTM(3, 6, num_layers=2, proj_size=2, batch_first=True),
               normal((2, 4, 3))),
    ModuleCase("lstm_proj_size_bidirectional_h0",
               wrapped(lambda nn: nn.LSTM(3, 5, proj_size=3, bidirectional=True), lstm_pair),
               with_states((4, 2, 3), (2, 2, 3), (2, 2, 5)), module="LSTM"),
    ModuleCase("lstm_unbatched", lambda nn: nn.LSTM(2, 3, bidirectional=True), normal((4, 2))),
    ModuleCase("gru", lambda nn: nn.GRU(3, 4), normal((6, 2, 3))),
    ModuleCase("gru_bidirectional_two_layers_batch_first_h0",
               lambda nn: nn.GRU(3, 4, num_layers=2, bidirectional=True, batch_first=True),
               with_states((3, 5, 3), (4, 3, 4))),
    ModuleCase("gru_no_bias_unbatched", lambda nn: nn.GRU(3, 4, bias=False),
               normal((5, 3))),
    ModuleCase("gru_dropout_eval", lambda nn: nn.GRU(3, 4, num_layers=3, dropout=0.5),
               normal((4, 2, 3)), train=False),
    # packed sequences: outputs past each length are zero, final states at each last step
    ModuleCase("rnn_packed_unsorted",
               wrapped(lambda nn: nn.RNN(3, 4, num_layers=2, bidirectional=True), packed()),
               normal((5, 4, 3)), module="RNN"),
    ModuleCase("gru_packed_bidirectional_batch_first_h0",
               wrapped(lambda nn: nn.GRU(3, 4, num_layers=2, bidirectional=True,
                                         batch_first=True), packed(batch_first=True)),
               with_states((4, 5, 3), (4, 4, 4)), module="GRU"),
    ModuleCase("gru_packed_sorted",
               wrapped(lambda nn: nn.GRU(2, 3), packed(lengths=[4, 4, 2], sort=True)),
               normal((4, 3, 2)), module="GRU"),
    ModuleCase("lstm_packed_bidirectional_proj_h0",
               wrapped(lambda nn: nn.LSTM(3, 5, num_layers=2, bidirectional=True, proj_size=2),
                       packed(pair=True)),
               with_states((5, 4, 3), (4, 4, 2), (4, 4, 5)), module="LSTM"),
    # longer than a block of steps whose input projection is one product (8)
    ModuleCase("lstm_long_bidirectional_batch_first",
               lambda nn: nn.LSTM(3, 4, num_layers=2, bidirectional=True, batch_first=True),
               normal((2, 19, 3))),
    ModuleCase("gru_long_packed_unsorted",
               wrapped(lambda nn: nn.GRU(3, 4, num_layers=2, bidirectional=True),
                       packed(lengths=[9, 17, 3, 17, 8])),
               normal((17, 5, 3)), module="GRU"),
    ModuleCase("rnn_long", lambda nn: nn.RNN(2, 3), normal((16, 2, 2))),
    # cells
    ModuleCase("rnn_cell", lambda nn: nn.RNNCell(3, 4), with_states((5, 3), (5, 4))),
    ModuleCase("rnn_cell_relu_no_bias_zero_state",
               lambda nn: nn.RNNCell(3, 4, bias=False, nonlinearity="relu"), normal((5, 3))),
    ModuleCase("lstm_cell", wrapped(lambda nn: nn.LSTMCell(3, 4), lstm_pair),
               with_states((5, 3), (5, 4), (5, 4)), module="LSTMCell"),
    ModuleCase("lstm_cell_unbatched_zero_state", lambda nn: nn.LSTMCell(3, 4), normal((3,))),
    ModuleCase("gru_cell", lambda nn: nn.GRUCell(3, 4), with_states((5, 3), (5, 4))),
    ModuleCase("gru_cell_unbatched", lambda nn: nn.GRUCell(3, 4, bias=False),
               with_states((3,), (4,))),
]
