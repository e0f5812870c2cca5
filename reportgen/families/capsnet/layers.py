"""The class capsules of Sabour, Frosst & Hinton 2017's CapsNet in Keras 3: votes from every
primary capsule, dynamic routing into the classes (reportgen.families.capsnet.routing). The
layers it shares with other families (PrimaryCaps, Length, Mask) are reportgen.capsnet.layers'.

Capsule index order: primary capsule i = (row * grid_width + column) * types + type, the
(H, W, types) grid flattened in row-major order (as reportgen.capsnet.layers).
"""

from __future__ import annotations

import keras
from keras import ops

from reportgen.capsnet.layers import PACKAGE
from reportgen.capsnet.ops import squash
from reportgen.families.capsnet.routing import dynamic_routing


@keras.saving.register_keras_serializable(package=PACKAGE)
class ClassCaps(keras.layers.Layer):
    """Class capsules by dynamic routing; returns [class capsules, coupling coefficients].

    votes u_hat[j|i] = W[i, j] u_i with one (dims x input_dims) matrix per (input capsule, class),
    or, with `weight_sharing`, per (capsule type, class) (LaLonde & Bagci 2018). No bias.
    Outputs: (batch, classes, dims) and (batch, inputs, classes).

    Two choices of other implementations, for imported models (defaults: Sabour et al. 2017):
    `routing_softmax="inputs"` normalises the couplings over the input capsules instead of the
    classes; `detach_routing_votes` routes on votes without gradient and lets the gradient flow
    only through the last iteration's weighted sum, with the couplings held fixed (same outputs).
    """

    def __init__(self, classes: int, dims: int, routing_iterations: int = 3,
                 weight_sharing: bool = False, capsule_types: int = 1,
                 kernel_init_stddev: float = 0.1, routing_softmax: str = "classes",
                 detach_routing_votes: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.classes = int(classes)
        self.dims = int(dims)
        self.routing_iterations = int(routing_iterations)
        self.weight_sharing = bool(weight_sharing)
        self.capsule_types = int(capsule_types)
        self.kernel_init_stddev = float(kernel_init_stddev)
        self.routing_softmax = str(routing_softmax)
        self.detach_routing_votes = bool(detach_routing_votes)
        if self.routing_softmax not in ("classes", "inputs"):
            raise ValueError(f"routing_softmax must be 'classes' or 'inputs'. "
                             f"Received: {routing_softmax!r}")
        if self.routing_iterations < 1:
            raise ValueError(f"routing_iterations must be >= 1. Received: {routing_iterations}")

    def build(self, input_shape):
        _, inputs, input_dims = input_shape
        if self.weight_sharing and inputs % self.capsule_types:
            raise ValueError(f"With weight sharing, the number of input capsules ({inputs}) must "
                             f"be a multiple of capsule_types ({self.capsule_types}).")
        self.input_capsules = inputs
        matrices = self.capsule_types if self.weight_sharing else inputs
        self.kernel = self.add_weight(
            name="kernel", shape=(matrices, self.classes, self.dims, input_dims),
            initializer=keras.initializers.RandomNormal(stddev=self.kernel_init_stddev))

    def votes(self, primary):
        """u_hat[j|i] for primary capsules (batch, inputs, input_dims) -> (b, inputs, classes, dims)."""
        if not self.weight_sharing:
            # one (batch x k) @ (k x classes*dims) product per input capsule: as a batched
            # matmul, with its gradient, XLA on CPU runs it faster than the equivalent einsum
            # (the compact MultiMNIST CapsNet's training step: 315 against 272 pairs/s)
            inputs, input_dims = self.input_capsules, primary.shape[-1]
            kernel = ops.reshape(ops.transpose(self.kernel, (0, 3, 1, 2)),
                                 (inputs, input_dims, self.classes * self.dims))
            votes = ops.matmul(ops.transpose(primary, (1, 0, 2)), kernel)   # (i, b, j*d)
            return ops.reshape(ops.transpose(votes, (1, 0, 2)),
                               (-1, inputs, self.classes, self.dims))
        cells = self.input_capsules // self.capsule_types
        grouped = ops.reshape(primary, (-1, cells, self.capsule_types, primary.shape[-1]))
        votes = ops.einsum("bptk,tjdk->bptjd", grouped, self.kernel)
        return ops.reshape(votes, (-1, self.input_capsules, self.classes, self.dims))

    def call(self, primary):
        votes = self.votes(primary)
        if not self.detach_routing_votes:
            return dynamic_routing(votes, self.routing_iterations, self.routing_softmax)
        # The couplings depend on the detached votes only; the outputs are the same numbers.
        _, coupling = dynamic_routing(ops.stop_gradient(votes), self.routing_iterations,
                                      self.routing_softmax)
        return squash(ops.einsum("bij,bijd->bjd", coupling, votes)), coupling

    def compute_output_shape(self, input_shape):
        batch, inputs, _ = input_shape
        return [(batch, self.classes, self.dims), (batch, inputs, self.classes)]

    def get_config(self):
        return {**super().get_config(), "classes": self.classes, "dims": self.dims,
                "routing_iterations": self.routing_iterations,
                "weight_sharing": self.weight_sharing, "capsule_types": self.capsule_types,
                "kernel_init_stddev": self.kernel_init_stddev,
                "routing_softmax": self.routing_softmax,
                "detach_routing_votes": self.detach_routing_votes}
