# CORPUS: torchvision is not installed beside the CPU build of PyTorch here, so its ResNet model
# file (torchvision/models/resnet.py and the utils.py it imports) is copied in as the `models`
# package that main.py reads its architectures from (models.__dict__, as torchvision.models).
from .resnet import *
