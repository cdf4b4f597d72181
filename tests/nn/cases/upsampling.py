"""Cases of Upsample (nearest, bilinear with and without align_corners, linear, trilinear,
by size or scale), its two fixed-mode forms, and PixelShuffle / PixelUnshuffle."""
from ..module_cases import ModuleCase, normal

MODULE_CASES = [
    ModuleCase("upsample_nearest", lambda nn: nn.Upsample(scale_factor=2), normal((2, 3, 3, 4)),
               module="Upsample"),
    ModuleCase("upsample_nearest_size", lambda nn: nn.Upsample(size=(5, 7)),
               normal((1, 2, 3, 3)), module="Upsample"),
    ModuleCase("upsample_bilinear", lambda nn: nn.Upsample(scale_factor=1.5, mode="bilinear"),
               normal((2, 2, 4, 5)), module="Upsample"),
    ModuleCase("upsample_bilinear_corners", lambda nn: nn.Upsample(
        size=(7, 3), mode="bilinear", align_corners=True), normal((1, 2, 4, 5)),
        module="Upsample"),
    ModuleCase("upsample_linear", lambda nn: nn.Upsample(scale_factor=2.5, mode="linear"),
               normal((2, 3, 4)), module="Upsample"),
    ModuleCase("upsample_trilinear", lambda nn: nn.Upsample(scale_factor=(2, 1.5, 1),
                                                            mode="trilinear"),
               normal((1, 2, 2, 3, 2)), module="Upsample"),
    ModuleCase("upsample_nearest_exact", lambda nn: nn.Upsample(scale_factor=1.7,
                                                                mode="nearest-exact"),
               normal((1, 2, 5, 3)), module="Upsample"),
    ModuleCase("upsampling_nearest2d", lambda nn: nn.UpsamplingNearest2d(scale_factor=3),
               normal((1, 2, 2, 3))),
    ModuleCase("upsampling_bilinear2d", lambda nn: nn.UpsamplingBilinear2d(size=(5, 4)),
               normal((1, 2, 3, 3))),
    ModuleCase("pixel_shuffle", lambda nn: nn.PixelShuffle(2), normal((2, 12, 3, 4)),
               module="PixelShuffle"),
    ModuleCase("pixel_unshuffle", lambda nn: nn.PixelUnshuffle(2), normal((2, 3, 4, 6)),
               module="PixelUnshuffle"),
]
