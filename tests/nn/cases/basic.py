"""Cases of the first layers labkit had: Linear, Conv2d, pooling, Embedding, RNN, LSTM,
activations, Dropout (eval), Flatten, Identity and the containers."""
from ..module_cases import ModuleCase, ints, normal

MODULE_CASES = [
    ModuleCase("linear", lambda nn: nn.Linear(6, 3), normal((5, 6))),
    ModuleCase("linear_no_bias_3d", lambda nn: nn.Linear(4, 2, bias=False), normal((2, 3, 4))),
    ModuleCase("conv2d", lambda nn: nn.Conv2d(3, 4, 3, stride=2, padding=1, dilation=2),
               normal((2, 3, 9, 9))),
    ModuleCase("max_pool2d", lambda nn: nn.MaxPool2d(2), normal((2, 3, 6, 6))),
    ModuleCase("embedding", lambda nn: nn.Embedding(10, 4), ints((3, 5), 10)),
    ModuleCase("rnn", lambda nn: nn.RNN(3, 5, num_layers=2), normal((7, 4, 3)),
               output=lambda out: out[0]),
    ModuleCase("lstm", lambda nn: nn.LSTM(3, 5, batch_first=True), normal((4, 7, 3)),
               output=lambda out: out[0]),
    ModuleCase("relu", lambda nn: nn.ReLU(), normal((3, 4))),
    ModuleCase("tanh", lambda nn: nn.Tanh(), normal((3, 4))),
    ModuleCase("sigmoid", lambda nn: nn.Sigmoid(), normal((3, 4))),
    ModuleCase("softmax", lambda nn: nn.Softmax(dim=1), normal((3, 4))),
    ModuleCase("dropout_eval", lambda nn: nn.Dropout(0.3), normal((3, 4)), train=False),
    ModuleCase("flatten", lambda nn: nn.Flatten(), normal((2, 3, 4))),
    ModuleCase("identity", lambda nn: nn.Identity(), normal((2, 3))),
    ModuleCase("sequential", lambda nn: nn.Sequential(nn.Linear(4, 8), nn.Tanh(),
                                                      nn.Linear(8, 2)), normal((5, 4))),
    ModuleCase("module_list", lambda nn: _Stack(nn), normal((5, 4)), module="ModuleList"),
]


def _Stack(nn):
    """A ModuleList used the usual way: layers applied in turn."""
    class Stack(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])

        def forward(self, x):
            for layer in self.layers:
                x = layer(x).tanh()
            return x
    return Stack()
