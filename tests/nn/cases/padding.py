"""Cases of the padding layers (every mode, 1-d and 2-d, batched and not, negative padding
cropping)."""
from ..module_cases import ModuleCase, normal

MODULE_CASES = [
    ModuleCase("zero_pad1d", lambda nn: nn.ZeroPad1d((1, 2)), normal((2, 3, 4))),
    ModuleCase("zero_pad2d", lambda nn: nn.ZeroPad2d(2), normal((2, 3, 3, 4))),
    ModuleCase("zero_pad2d_crop", lambda nn: nn.ZeroPad2d((1, -1, 0, 2)), normal((1, 2, 3, 4)),
               module="ZeroPad2d"),
    ModuleCase("constant_pad1d", lambda nn: nn.ConstantPad1d(2, 3.5), normal((3, 4))),
    ModuleCase("constant_pad2d", lambda nn: nn.ConstantPad2d((1, 0, 2, 1), -1.0),
               normal((2, 2, 3, 3))),
    ModuleCase("reflection_pad1d", lambda nn: nn.ReflectionPad1d((2, 1)), normal((2, 3, 4))),
    ModuleCase("reflection_pad2d", lambda nn: nn.ReflectionPad2d((1, 2, 2, 0)),
               normal((2, 2, 4, 5))),
    ModuleCase("replication_pad1d", lambda nn: nn.ReplicationPad1d(3), normal((3, 4))),
    ModuleCase("replication_pad2d", lambda nn: nn.ReplicationPad2d((0, 2, 1, 1)),
               normal((1, 2, 3, 3))),
    ModuleCase("circular_pad1d", lambda nn: nn.CircularPad1d((1, 2)), normal((2, 3, 4))),
    ModuleCase("circular_pad2d", lambda nn: nn.CircularPad2d(1), normal((1, 2, 3, 4))),
]
