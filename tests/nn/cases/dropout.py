"""Cases of the dropout layers in eval mode (identity); training masks come from labkit's own
generator, so they are checked by their statistics in test_functional_layers.py."""
from ..module_cases import ModuleCase, normal

MODULE_CASES = [
    ModuleCase("dropout1d_eval", lambda nn: nn.Dropout1d(0.4), normal((2, 3, 5)), train=False),
    ModuleCase("dropout2d_eval", lambda nn: nn.Dropout2d(0.4), normal((2, 3, 4, 4)),
               train=False),
    ModuleCase("alpha_dropout_eval", lambda nn: nn.AlphaDropout(0.2), normal((3, 4)),
               train=False),
    ModuleCase("feature_alpha_dropout_eval", lambda nn: nn.FeatureAlphaDropout(0.2),
               normal((2, 3, 4)), train=False),
    ModuleCase("dropout_p0_train", lambda nn: nn.Dropout(0.0), normal((3, 4)),
               module="Dropout"),
]
