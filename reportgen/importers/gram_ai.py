"""gram-ai/capsule-networks (Kenta Iwasaki, PyTorch): `capsule_network.py` (MNIST) and
`capsule_network_svhn.py` (32x32x3), checkpoints saved as `torch.save(model.state_dict(),
'epochs/epoch_%d.pt')`. Layout of commit 6eeda08 (the repository's last, 2018-11-09), unchanged
since its first release:

    conv1.weight (256, C, 9, 9), conv1.bias (256,)
    primary_capsules.capsules.{0..7}.weight (32, 256, 9, 9), .bias (32,)
    digit_capsules.route_weights (10, 1152, 8, 16)          (2048 capsules for 32x32 inputs)
    decoder.{0,2,4}.weight (512, 160), (1024, 512), (H*W*C, 1024), .bias

The network and its conversion are in reportgen.importers.torch_capsnet.
"""

from __future__ import annotations

import sys

from reportgen.importers.common import Converted
from reportgen.importers.tensors import Checkpoint
from reportgen.importers.torch_capsnet import TorchNames, convert_torch_capsnet
from reportgen.importers.torch_capsnet import DIFFERENCES  # noqa: F401  (this layout's too)

NAME = "gram-ai"
PROJECT = "gram-ai/capsule-networks"
VERSIONS = "commit 6eeda08 (2018-11-09)"
FRAMEWORK = "PyTorch"
MODEL_SUFFIX = "GramAI"
ROUTING_ITERATIONS = 3     # NUM_ROUTING_ITERATIONS
NAMES = TorchNames(conv_weight="conv1.weight", conv_bias="conv1.bias",
                   primary_prefix="primary_capsules.capsules.",
                   route_weights="digit_capsules.route_weights", decoder_prefix="decoder.")


def convert(checkpoint: Checkpoint, routing_iterations: int = ROUTING_ITERATIONS) -> Converted:
    return convert_torch_capsnet(checkpoint, sys.modules[__name__], NAMES, routing_iterations)
