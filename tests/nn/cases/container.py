"""Cases of the containers: ModuleDict, ParameterList and ParameterDict inside small models
(state_dict names as PyTorch's: 'heads.cls.weight', 'scales.0'...)."""
from collections import OrderedDict

from ..module_cases import ModuleCase, normal


def _heads(nn):
    class Heads(nn.Module):
        def __init__(self):
            super().__init__()
            self.heads = nn.ModuleDict({"cls": nn.Linear(4, 3), "box": nn.Linear(4, 2)})
            self.heads["extra"] = nn.Tanh()

        def forward(self, x):
            return self.heads["cls"](x).sum(-1) + self.heads["extra"](self.heads["box"](x)).sum(-1)
    return Heads()


def _scales(nn, torch_like):
    class Scales(nn.Module):
        def __init__(self):
            super().__init__()
            self.scales = nn.ParameterList([nn.Parameter(torch_like.ones(4)) for _ in range(2)])
            self.scales.append(nn.Parameter(torch_like.full((4,), 0.5)))
            self.shift = nn.ParameterDict({"a": nn.Parameter(torch_like.zeros(4))})
            self.shift["b"] = nn.Parameter(torch_like.ones(4) * 0.1)

        def forward(self, x):
            for s in self.scales:
                x = x * s
            return x + self.shift["a"] - self.shift["b"]
    return Scales()


def _lib(nn):
    import labkit
    import torch
    return torch if nn is torch.nn else labkit


MODULE_CASES = [
    ModuleCase("module_dict", _heads, normal((5, 4)), module="ModuleDict"),
    ModuleCase("parameter_list", lambda nn: _scales(nn, _lib(nn)), normal((3, 4)),
               module="ParameterList"),
    ModuleCase("parameter_dict", lambda nn: _scales(nn, _lib(nn)), normal((2, 4)),
               module="ParameterDict"),
    ModuleCase("sequential_ordered_dict", lambda nn: nn.Sequential(OrderedDict(
        fc=nn.Linear(3, 4), act=nn.GELU(), out=nn.Linear(4, 2))), normal((5, 3)),
        module="Sequential"),
    # without GPUs both just call the module (state_dict keys "module.weight"...)
    ModuleCase("data_parallel", lambda nn: nn.DataParallel(nn.Linear(3, 2)), normal((4, 3))),
]
