"""Cases of the normalisation layers: batch norm (training, eval, cumulative momentum, without
running statistics or affine parameters), instance, layer, group and RMS norm."""
from ..module_cases import ModuleCase


def _shifted(shape):
    """Inputs far from mean 0 / variance 1, so the running statistics move visibly."""
    return lambda rng: rng.standard_normal(shape) * 3 + 2


MODULE_CASES = [
    ModuleCase("batch_norm1d", lambda nn: nn.BatchNorm1d(4), _shifted((8, 4))),
    ModuleCase("batch_norm1d_3d", lambda nn: nn.BatchNorm1d(3, momentum=0.3), _shifted((4, 3, 5)),
               module="BatchNorm1d"),
    ModuleCase("batch_norm1d_cumulative", lambda nn: nn.BatchNorm1d(3, momentum=None),
               _shifted((6, 3)), module="BatchNorm1d"),
    ModuleCase("batch_norm1d_eval", lambda nn: nn.BatchNorm1d(4), _shifted((5, 4)), train=False,
               module="BatchNorm1d"),
    ModuleCase("batch_norm2d", lambda nn: nn.BatchNorm2d(3), _shifted((2, 3, 4, 5))),
    ModuleCase("batch_norm2d_no_stats", lambda nn: nn.BatchNorm2d(3, track_running_stats=False),
               _shifted((2, 3, 4, 4)), train=False, module="BatchNorm2d"),
    ModuleCase("batch_norm2d_no_affine", lambda nn: nn.BatchNorm2d(2, affine=False, eps=1e-3),
               _shifted((3, 2, 3, 3)), module="BatchNorm2d"),
    ModuleCase("batch_norm3d", lambda nn: nn.BatchNorm3d(2), _shifted((2, 2, 3, 2, 3))),
    ModuleCase("instance_norm2d", lambda nn: nn.InstanceNorm2d(3), _shifted((2, 3, 4, 5))),
    ModuleCase("instance_norm2d_stats", lambda nn: nn.InstanceNorm2d(
        3, affine=True, track_running_stats=True), _shifted((2, 3, 4, 4)),
        module="InstanceNorm2d"),
    ModuleCase("instance_norm2d_eval_stats", lambda nn: nn.InstanceNorm2d(
        3, track_running_stats=True), _shifted((2, 3, 4, 4)), train=False,
        module="InstanceNorm2d"),
    ModuleCase("instance_norm2d_unbatched", lambda nn: nn.InstanceNorm2d(2, affine=True),
               _shifted((2, 3, 3)), module="InstanceNorm2d"),
    ModuleCase("instance_norm1d", lambda nn: nn.InstanceNorm1d(3, affine=True),
               _shifted((2, 3, 6))),
    ModuleCase("layer_norm", lambda nn: nn.LayerNorm(6), _shifted((2, 3, 6))),
    ModuleCase("layer_norm_2d_shape", lambda nn: nn.LayerNorm((3, 4), eps=1e-3, bias=False),
               _shifted((2, 3, 4)), module="LayerNorm"),
    ModuleCase("layer_norm_plain", lambda nn: nn.LayerNorm([5], elementwise_affine=False),
               _shifted((4, 5)), module="LayerNorm"),
    ModuleCase("group_norm", lambda nn: nn.GroupNorm(2, 6), _shifted((3, 6, 4))),
    ModuleCase("group_norm_plain", lambda nn: nn.GroupNorm(3, 3, affine=False),
               _shifted((2, 3, 2, 2)), module="GroupNorm"),
    ModuleCase("rms_norm", lambda nn: nn.RMSNorm(5), _shifted((2, 3, 5))),
    ModuleCase("rms_norm_eps", lambda nn: nn.RMSNorm([2, 5], eps=1e-4,
                                                     elementwise_affine=False),
               _shifted((3, 2, 5)), module="RMSNorm"),
]
