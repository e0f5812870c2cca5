"""The Udacity-style capsule network notebook (Cezanne Camacho's `Capsule_Network.ipynb` in
cezannec/capsule_net_pytorch, which teaching demos copy; PyTorch), weights saved as
`torch.save(capsule_net.state_dict(), ...)`.
Layout of commit 607b7ab (2020-05-15):

    conv_layer.conv.weight (256, 1, 9, 9), conv_layer.conv.bias (256,)
    primary_capsules.capsules.{0..7}.weight (32, 256, 9, 9), .bias (32,)
    digit_capsules.W (10, 1152, 8, 16)
    decoder.linear_layers.{0,2,4}.weight (512, 160), (1024, 512), (784, 1024), .bias

Its network is gram-ai's (softmax over the input capsules, no ReLU on the primary capsules);
the conversion is in reportgen.importers.torch_capsnet.
"""

from __future__ import annotations

import sys

from reportgen.importers.common import Converted
from reportgen.importers.tensors import Checkpoint
from reportgen.importers.torch_capsnet import TorchNames, convert_torch_capsnet
from reportgen.importers.torch_capsnet import DIFFERENCES  # noqa: F401  (this layout's too)

NAME = "udacity"
PROJECT = "cezannec/capsule_net_pytorch Capsule_Network.ipynb"
VERSIONS = "commit 607b7ab (2020-05-15)"
FRAMEWORK = "PyTorch"
MODEL_SUFFIX = "Udacity"
ROUTING_ITERATIONS = 3     # dynamic_routing(..., routing_iterations=3)
NAMES = TorchNames(conv_weight="conv_layer.conv.weight", conv_bias="conv_layer.conv.bias",
                   primary_prefix="primary_capsules.capsules.", route_weights="digit_capsules.W",
                   decoder_prefix="decoder.linear_layers.")


def convert(checkpoint: Checkpoint, routing_iterations: int = ROUTING_ITERATIONS) -> Converted:
    return convert_torch_capsnet(checkpoint, sys.modules[__name__], NAMES, routing_iterations)
