"""Cases of the convolutions: groups, dilation, stride, padding 'same'/'valid', every padding
mode, transposed with output_padding, unbatched inputs."""
from ..module_cases import ModuleCase, normal

MODULE_CASES = [
    ModuleCase("conv1d", lambda nn: nn.Conv1d(4, 6, 3, stride=2, padding=1, groups=2),
               normal((2, 4, 11))),
    ModuleCase("conv1d_same_reflect", lambda nn: nn.Conv1d(3, 2, 4, padding="same",
                                                           padding_mode="reflect", dilation=2),
               normal((2, 3, 9)), module="Conv1d"),
    ModuleCase("conv1d_unbatched", lambda nn: nn.Conv1d(3, 2, 2, bias=False), normal((3, 7)),
               module="Conv1d"),
    ModuleCase("conv2d_groups_same", lambda nn: nn.Conv2d(4, 8, 3, padding="same", groups=4),
               normal((2, 4, 6, 5)), module="Conv2d"),
    ModuleCase("conv2d_even_same", lambda nn: nn.Conv2d(2, 3, (2, 4), padding="same"),
               normal((1, 2, 5, 6)), module="Conv2d"),
    ModuleCase("conv2d_valid", lambda nn: nn.Conv2d(2, 3, 3, padding="valid", stride=(2, 1)),
               normal((2, 2, 7, 6)), module="Conv2d"),
    ModuleCase("conv2d_replicate", lambda nn: nn.Conv2d(2, 3, 3, padding=(1, 2),
                                                        padding_mode="replicate"),
               normal((2, 2, 5, 5)), module="Conv2d"),
    ModuleCase("conv2d_circular", lambda nn: nn.Conv2d(2, 2, 3, padding=1, stride=2,
                                                       padding_mode="circular"),
               normal((1, 2, 6, 7)), module="Conv2d"),
    ModuleCase("conv2d_reflect_unbatched", lambda nn: nn.Conv2d(3, 2, 3, padding=1,
                                                                padding_mode="reflect"),
               normal((3, 5, 4)), module="Conv2d"),
    ModuleCase("conv_transpose2d", lambda nn: nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1,
                                                                 output_padding=1, groups=2),
               normal((2, 4, 4, 5))),
    ModuleCase("conv_transpose2d_dilated", lambda nn: nn.ConvTranspose2d(
        2, 3, (2, 3), stride=(1, 2), dilation=(3, 2), padding=(1, 0), bias=False),
        normal((1, 2, 3, 4)), module="ConvTranspose2d"),
    ModuleCase("conv_transpose2d_output_size", lambda nn: nn.ConvTranspose2d(2, 2, 3, stride=3),
               normal((1, 2, 3, 3)), kwargs={"output_size": (10, 11)}, module="ConvTranspose2d"),
    ModuleCase("conv_transpose1d", lambda nn: nn.ConvTranspose1d(3, 2, 4, stride=2, padding=1),
               normal((2, 3, 6))),
]
