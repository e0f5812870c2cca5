"""Cascading model-parameter randomisation (Adebayo et al. 2018, section 3.1): the weighted
layers of a model re-initialised one at a time from the top (output side) down, cumulatively,
on a copy of the network; the trained network and its stored weights are never touched.

The random values of a layer are what its own Keras initializers draw (the kernel's
initializer, the bias's — zeros for most —, a batch norm's ones and zeros): a second network of
the same params is built under `keras.utils.set_random_seed(SEED_OFFSET + seed)` (offset: a
model built under the usual seeds 0, 1, … untrained would otherwise be its own "random"
weights), and its freshly initialised
weights are kept before the trained ones are copied into it. Randomising to depth d assigns those
values to the d top layers' variables in place, so the copy's compiled passes serve every depth
without retracing (reportgen.capsnet.compiled)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

SEED_OFFSET = 104_729      # the 10,000th prime


def weighted_layers(model) -> list:
    """The layers of a Keras model that hold variables, output side first (the reverse of
    the model's layer order, which is topological: inputs first)."""
    return [layer for layer in reversed(model.layers) if layer.weights]


def values_of(layers) -> list[list[np.ndarray]]:
    """Each layer's variables as NumPy copies."""
    return [[np.array(v.numpy(), copy=True) for v in layer.weights] for layer in layers]


def assign(layers, values) -> None:
    for layer, arrays in zip(layers, values):
        for variable, array in zip(layer.weights, arrays):
            variable.assign(array)


@dataclass
class Cascade:
    """Weighted layers (output side first) with their trained and random values."""
    layers: list
    trained: list[list[np.ndarray]]
    random: list[list[np.ndarray]]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(layer.name for layer in self.layers)

    def at(self, depth: int) -> None:
        """The `depth` top layers random, the others trained."""
        if not 0 <= depth <= len(self.layers):
            raise ValueError(f"depth must be in [0, {len(self.layers)}]. Received: {depth}")
        assign(self.layers, [self.random[i] if i < depth else self.trained[i]
                             for i in range(len(self.layers))])


@dataclass
class RandomisedCopy:
    net: Any              # a Network of the same params, trained weights copied in
    cascade: Cascade      # its encoder's weighted layers


def randomised_copy(net, seed: int = 0) -> RandomisedCopy:
    """A second network of `net`'s params: its freshly initialised (seeded) weights kept as the
    random values, `net`'s weights copied into it (the trained values). `net` is only read."""
    import keras

    from reportgen.capsnet.architecture import build_capsnet

    keras.utils.set_random_seed(SEED_OFFSET + int(seed))
    copy = build_capsnet(net.params)
    layers = weighted_layers(copy.encoder)
    random = values_of(layers)
    copy.model.set_weights(net.model.get_weights())
    trained_layers = weighted_layers(net.encoder)
    if [layer.name for layer in trained_layers] != [layer.name for layer in layers]:
        raise RuntimeError("the copy of the network has other weighted layers than the network")
    trained = values_of(trained_layers)
    cascade = Cascade(layers, trained, random)
    cascade.at(0)
    return RandomisedCopy(copy, cascade)


def cascade_maps(cascade: Cascade, explain) -> list:
    """[explain() after randomising 0, 1, …, L top layers] (L = the cascade's layers); the
    cascade is left trained (depth 0) afterwards, also when explain fails."""
    out = []
    try:
        for depth in range(len(cascade.layers) + 1):
            cascade.at(depth)
            out.append(explain())
    finally:
        cascade.at(0)
    return out
