"""Cases of Identity, Bilinear, Flatten and Unflatten (Linear's are in basic.py)."""
from ..module_cases import ModuleCase, normal

MODULE_CASES = [
    ModuleCase("identity_args", lambda nn: nn.Identity(3, scale=2), normal((2, 3)),
               module="Identity"),
    ModuleCase("bilinear", lambda nn: nn.Bilinear(3, 4, 5),
               lambda rng: (rng.standard_normal((6, 3)), rng.standard_normal((6, 4)))),
    ModuleCase("bilinear_no_bias_3d", lambda nn: nn.Bilinear(2, 3, 4, bias=False),
               lambda rng: (rng.standard_normal((2, 5, 2)), rng.standard_normal((2, 5, 3))),
               module="Bilinear"),
    ModuleCase("flatten_middle", lambda nn: nn.Flatten(0, 1), normal((2, 3, 4)),
               module="Flatten"),
    ModuleCase("unflatten", lambda nn: nn.Unflatten(1, (2, -1)), normal((3, 8))),
    ModuleCase("unflatten_last", lambda nn: nn.Unflatten(-1, (2, 2, 3)), normal((2, 12)),
               module="Unflatten"),
]

MODULE_CASES += [
    ModuleCase("unfold", lambda nn: nn.Unfold((2, 3), dilation=(1, 2), padding=1, stride=2),
               normal((2, 3, 5, 6))),
    ModuleCase("fold", lambda nn: nn.Fold((4, 5), 2, padding=1, stride=(1, 2)),
               normal((2, 8, 15))),
    ModuleCase("fold_unbatched", lambda nn: nn.Fold(3, 2), normal((4, 4)), module="Fold"),
]
