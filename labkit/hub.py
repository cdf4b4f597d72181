"""``torch.hub``'s ``load_state_dict_from_url``: a checkpoint named by a URL, downloaded once.

Model files such as torchvision's ``resnet.py`` import it to offer pretrained weights. labkit
reads safetensors checkpoints only (loading one never runs code), so the URL must name a
``.safetensors`` file; PyTorch's pickled ``.pth`` / ``.pt`` files are refused with how to
convert one. Files are kept in ``get_dir()/checkpoints`` (``$LABKIT_HOME/hub``, by default
``~/.cache/labkit/hub``) and read from there afterwards.

>>> import os, tempfile, labkit as lk
>>> folder = tempfile.mkdtemp()
>>> lk.save({"fc.weight": lk.ones(2, 3)}, os.path.join(folder, "tiny.safetensors"))
>>> url = "file://" + os.path.join(folder, "tiny.safetensors")
>>> state = lk.hub.load_state_dict_from_url(url, model_dir=os.path.join(folder, "cache"))
>>> state["fc.weight"].shape
(2, 3)
"""
import os
import shutil
import urllib.parse
import urllib.request

from .errors import CheckpointError
from .tensor.atomic_file import write_atomically
from .tensor.checkpoint import load

__all__ = ["get_dir", "load_state_dict_from_url"]


def get_dir():
    """The folder downloaded checkpoints are kept under: ``$LABKIT_HOME/hub``, by default
    ``~/.cache/labkit/hub``."""
    home = os.environ.get("LABKIT_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "labkit")
    return os.path.join(home, "hub")


def load_state_dict_from_url(url, model_dir=None, map_location=None, progress=True,
                             check_hash=False, file_name=None, weights_only=None):
    """The checkpoint at ``url`` (a safetensors file), downloaded into ``model_dir`` (by
    default ``get_dir()/checkpoints``) unless already there, then loaded as by ``lk.load``
    (``map_location``: the device for its tensors). ``progress``, ``check_hash`` and
    ``weights_only`` are accepted as in PyTorch and change nothing."""
    name = file_name or os.path.basename(urllib.parse.urlparse(url).path)
    if not name.endswith(".safetensors"):
        raise CheckpointError(
            f"load_state_dict_from_url: {url!r} is not a safetensors file. labkit reads "
            f"safetensors checkpoints only, never PyTorch's pickled .pth/.pt files (unpickling "
            f"can run code). Convert one with PyTorch: safetensors.torch.save_file("
            f"torch.load(path), 'model.safetensors'), then give its URL or lk.load the file.")
    folder = model_dir or os.path.join(get_dir(), "checkpoints")
    path = os.path.join(folder, name)
    if not os.path.exists(path):
        os.makedirs(folder, exist_ok=True)

        def fetch(tmp):
            with urllib.request.urlopen(url) as src, open(tmp, "wb") as dst:
                shutil.copyfileobj(src, dst)
        write_atomically(path, fetch)
    return load(path, map_location=map_location)
