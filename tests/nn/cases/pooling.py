"""Cases of the pools: ceil_mode, return_indices, count_include_pad, divisor_override, adaptive
windows that do and do not tile the input, unbatched inputs."""
from ..module_cases import ModuleCase, normal


def _first(out):
    return out[0]


MODULE_CASES = [
    ModuleCase("max_pool2d_ceil", lambda nn: nn.MaxPool2d(3, 2, padding=1, ceil_mode=True),
               normal((2, 3, 8, 7)), module="MaxPool2d"),
    ModuleCase("max_pool2d_indices", lambda nn: nn.MaxPool2d((2, 3), (2, 1), dilation=(1, 2),
                                                             return_indices=True),
               normal((2, 2, 6, 9)), module="MaxPool2d"),
    ModuleCase("max_pool2d_unbatched", lambda nn: nn.MaxPool2d(2), normal((3, 5, 5)),
               module="MaxPool2d"),
    ModuleCase("max_pool1d", lambda nn: nn.MaxPool1d(3, 2, 1, ceil_mode=True,
                                                     return_indices=True), normal((2, 3, 10))),
    ModuleCase("avg_pool1d", lambda nn: nn.AvgPool1d(3, 2, 1, ceil_mode=True,
                                                     count_include_pad=False),
               normal((2, 3, 10))),
    ModuleCase("avg_pool2d", lambda nn: nn.AvgPool2d(3, 2, 1), normal((2, 3, 7, 8))),
    ModuleCase("avg_pool2d_ceil_exclude", lambda nn: nn.AvgPool2d(
        3, 2, 1, ceil_mode=True, count_include_pad=False), normal((1, 2, 6, 7)),
        module="AvgPool2d"),
    ModuleCase("avg_pool2d_ceil_include", lambda nn: nn.AvgPool2d((3, 2), (2, 3), (1, 1),
                                                                  ceil_mode=True),
               normal((1, 2, 8, 7)), module="AvgPool2d"),
    ModuleCase("avg_pool2d_divisor", lambda nn: nn.AvgPool2d(2, divisor_override=3),
               normal((2, 2, 4, 6)), module="AvgPool2d"),
    ModuleCase("adaptive_avg_pool2d", lambda nn: nn.AdaptiveAvgPool2d((3, None)),
               normal((2, 3, 7, 5))),
    ModuleCase("adaptive_avg_pool2d_global", lambda nn: nn.AdaptiveAvgPool2d(1),
               normal((2, 3, 4, 5)), module="AdaptiveAvgPool2d"),
    ModuleCase("adaptive_avg_pool2d_tiles", lambda nn: nn.AdaptiveAvgPool2d((2, 3)),
               normal((2, 3, 4, 6)), module="AdaptiveAvgPool2d"),
    ModuleCase("adaptive_avg_pool1d", lambda nn: nn.AdaptiveAvgPool1d(4), normal((2, 3, 9))),
    ModuleCase("adaptive_max_pool2d", lambda nn: nn.AdaptiveMaxPool2d((3, 4),
                                                                      return_indices=True),
               normal((2, 3, 7, 9))),
    ModuleCase("adaptive_max_pool2d_up", lambda nn: nn.AdaptiveMaxPool2d(5),
               normal((1, 2, 3, 4)), module="AdaptiveMaxPool2d"),
    ModuleCase("adaptive_max_pool1d", lambda nn: nn.AdaptiveMaxPool1d(3), normal((2, 3, 8))),
]
