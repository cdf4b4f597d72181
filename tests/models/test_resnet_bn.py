"""A ResNet-style CNN with BatchNorm2d trained step for step with PyTorch on the digits (see
lockstep.py): a stem convolution, a residual block with an identity shortcut and one that halves
the resolution with a 1x1 convolution shortcut, global average pooling and a Linear head; SGD
with momentum, weight decay and a MultiStepLR. After training, ``eval()``: the running means and
variances equal PyTorch's, and so do the outputs on the test images."""
import numpy as np
import torch

import labkit as lk

from .lockstep import lockstep

BATCH, STEPS = 32, 30


def make_resnet(torch):
    nn, F = torch.nn, torch.nn.functional

    class BasicBlock(nn.Module):
        def __init__(self, in_planes, planes, stride=1):
            super().__init__()
            self.conv1 = nn.Conv2d(in_planes, planes, 3, stride=stride, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(planes)
            self.conv2 = nn.Conv2d(planes, planes, 3, stride=1, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(planes)
            self.shortcut = nn.Sequential()
            if stride != 1 or in_planes != planes:
                self.shortcut = nn.Sequential(
                    nn.Conv2d(in_planes, planes, 1, stride=stride, bias=False),
                    nn.BatchNorm2d(planes))

        def forward(self, x):
            out = F.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            out += self.shortcut(x)
            return F.relu(out)

    class ResNet(nn.Module):
        def __init__(self, num_classes=10):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 8, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(8)
            self.layer1 = BasicBlock(8, 8)
            self.layer2 = BasicBlock(8, 16, stride=2)
            self.pool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(16, num_classes)

        def forward(self, x):
            out = F.relu(self.bn1(self.conv1(x)))
            out = self.layer2(self.layer1(out))
            out = torch.flatten(self.pool(out), 1)
            return self.fc(out)

    return ResNet()


def optimize(torch, model):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    return optimizer, torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[12, 24],
                                                           gamma=0.2)


def loss_of(torch, model, images, labels):
    return torch.nn.CrossEntropyLoss()(model(images), labels)


def test_resnet_with_batchnorm_trains_step_for_step_with_pytorch(device):
    train, test = lk.data.digits()
    images, labels = (t.numpy() for t in train.tensors)
    order = np.random.default_rng(0).permutation(len(labels))
    batches = [(images[ids], labels[ids]) for ids in order[:BATCH * STEPS].reshape(STEPS, BATCH)]
    theirs, eager, captured = lockstep(make_resnet, optimize, loss_of, batches, device=device)
    test_images = test.tensors[0].numpy()
    theirs.eval()
    expected = theirs(torch.tensor(test_images)).detach().numpy()
    for model in (eager, captured):
        model.eval()
        for name, buffer in theirs.named_buffers():
            np.testing.assert_allclose(model.get_buffer(name).numpy(), buffer.numpy(),
                                       rtol=1e-4, atol=1e-5, err_msg=name)
        assert int(model.layer2.shortcut[1].num_batches_tracked) == STEPS
        x = lk.tensor(test_images).to(device)
        out = model(x).detach().numpy()
        np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)
        assert (out.argmax(1) == expected.argmax(1)).mean() > 0.99
        np.testing.assert_allclose(lk.function(model)(x).numpy(), out, rtol=1e-6, atol=1e-6)
