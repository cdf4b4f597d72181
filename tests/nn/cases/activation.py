"""Cases of the activation layers (values away from the kinks; the kinks themselves are checked
against PyTorch in test_functional_layers.py)."""
from ..module_cases import ModuleCase, normal


def _wide(shape):
    """Normal values spread over the interesting ranges (saturations, thresholds)."""
    return lambda rng: rng.standard_normal(shape) * 4


MODULE_CASES = [
    ModuleCase("relu_inplace", lambda nn: nn.ReLU(inplace=True), normal((3, 4)), grad=False),
    ModuleCase("relu6", lambda nn: nn.ReLU6(), _wide((3, 5))),
    ModuleCase("leaky_relu", lambda nn: nn.LeakyReLU(0.2), normal((3, 4))),
    ModuleCase("elu", lambda nn: nn.ELU(alpha=0.7), _wide((3, 4))),
    ModuleCase("selu", lambda nn: nn.SELU(), _wide((3, 4))),
    ModuleCase("celu", lambda nn: nn.CELU(alpha=2.0), _wide((3, 4))),
    ModuleCase("gelu", lambda nn: nn.GELU(), _wide((3, 4))),
    ModuleCase("gelu_tanh", lambda nn: nn.GELU(approximate="tanh"), _wide((3, 4)),
               module="GELU"),
    ModuleCase("silu", lambda nn: nn.SiLU(), _wide((3, 4))),
    ModuleCase("mish", lambda nn: nn.Mish(), _wide((3, 4))),
    ModuleCase("softplus", lambda nn: nn.Softplus(beta=2.0, threshold=3.0), _wide((4, 5))),
    ModuleCase("softsign", lambda nn: nn.Softsign(), _wide((3, 4))),
    ModuleCase("hardtanh", lambda nn: nn.Hardtanh(-2.0, 1.5), _wide((3, 4))),
    ModuleCase("hardsigmoid", lambda nn: nn.Hardsigmoid(), _wide((3, 4))),
    ModuleCase("hardswish", lambda nn: nn.Hardswish(), _wide((3, 4))),
    ModuleCase("logsigmoid", lambda nn: nn.LogSigmoid(), _wide((3, 4))),
    ModuleCase("tanhshrink", lambda nn: nn.Tanhshrink(), normal((3, 4))),
    ModuleCase("softshrink", lambda nn: nn.Softshrink(0.3), normal((3, 4))),
    ModuleCase("hardshrink", lambda nn: nn.Hardshrink(0.3), normal((3, 4))),
    ModuleCase("threshold", lambda nn: nn.Threshold(0.1, -3.0), normal((3, 4))),
    ModuleCase("glu", lambda nn: nn.GLU(dim=1), normal((3, 6, 2))),
    ModuleCase("prelu", lambda nn: nn.PReLU(), normal((3, 4))),
    ModuleCase("prelu_channels", lambda nn: nn.PReLU(4, init=0.1), normal((2, 4, 3, 3)),
               module="PReLU"),
    ModuleCase("log_softmax", lambda nn: nn.LogSoftmax(dim=-1), normal((3, 5))),
    ModuleCase("softmin", lambda nn: nn.Softmin(dim=0), normal((3, 5))),
    ModuleCase("softmax_implicit_dim", lambda nn: nn.Softmax(), normal((2, 3, 4)),
               module="Softmax"),
    ModuleCase("tanh_3d", lambda nn: nn.Tanh(), normal((2, 3, 4))),
    ModuleCase("softmax2d", lambda nn: nn.Softmax2d(), normal((2, 3, 2, 2))),
    ModuleCase("sigmoid_big", lambda nn: nn.Sigmoid(), lambda rng: rng.standard_normal(7) * 30,
               module="Sigmoid"),
]
