"""``labkit.distributed.checkpoint``: state dicts across layouts (``state_dict``)."""
from .state_dict import StateDictOptions, get_model_state_dict, set_model_state_dict

__all__ = ["StateDictOptions", "get_model_state_dict", "set_model_state_dict"]
