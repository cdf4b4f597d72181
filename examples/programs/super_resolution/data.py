from os.path import exists, join, basename
from os import makedirs, remove
import os, sys  # CORPUS: offline data instead of the BSDS300 download
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # CORPUS
import offline  # CORPUS
from offline import Compose, CenterCrop, ToTensor, Resize  # CORPUS: torchvision is not installed here

from dataset import DatasetFromFolder


def download_bsd300(dest="dataset"):
    output_image_dir = join(dest, "BSDS300/images")

    if not exists(output_image_dir):
        # CORPUS: BSDS300's 200 train and 100 test photographs (downloaded) replaced by 8 and 2
        # generated pictures of 264 x 264
        offline.write_pictures(join(output_image_dir, "train"), 8, 264, seed=1)  # CORPUS
        offline.write_pictures(join(output_image_dir, "test"), 2, 264, seed=2)  # CORPUS

    return output_image_dir


def calculate_valid_crop_size(crop_size, upscale_factor):
    return crop_size - (crop_size % upscale_factor)


def input_transform(crop_size, upscale_factor):
    return Compose([
        CenterCrop(crop_size),
        Resize(crop_size // upscale_factor),
        ToTensor(),
    ])


def target_transform(crop_size):
    return Compose([
        CenterCrop(crop_size),
        ToTensor(),
    ])


def get_training_set(upscale_factor):
    root_dir = download_bsd300()
    train_dir = join(root_dir, "train")
    crop_size = calculate_valid_crop_size(256, upscale_factor)

    return DatasetFromFolder(train_dir,
                             input_transform=input_transform(crop_size, upscale_factor),
                             target_transform=target_transform(crop_size))


def get_test_set(upscale_factor):
    root_dir = download_bsd300()
    test_dir = join(root_dir, "test")
    crop_size = calculate_valid_crop_size(256, upscale_factor)

    return DatasetFromFolder(test_dir,
                             input_transform=input_transform(crop_size, upscale_factor),
                             target_transform=target_transform(crop_size))
