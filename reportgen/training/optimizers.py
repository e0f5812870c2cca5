"""The optimizers `[training] optimizer` names (reportgen.settings.model_params.TrainingParams),
as Keras optimizers the trainer steps.

- "adam": Keras's Adam (Kingma & Ba 2015; beta_1 0.9, beta_2 0.999, epsilon 1e-7), exactly as
  every model reportgen trained before the setting existed when `weight_decay` is 0.
- "sgd": stochastic gradient descent with momentum as PyTorch's `torch.optim.SGD` computes it
  (dampening 0, not Nesterov): a momentum buffer b per variable, b <- momentum x b + g, then
  w <- w - learning_rate x b (with momentum 0: w <- w - learning_rate x g, and no buffer). Keras's
  own SGD keeps the buffer scaled by the learning rate (m <- momentum x m - learning_rate x g),
  which is the same while the rate is constant but not once it decays; this one follows
  PyTorch, whose recipes (Tsai et al. 2020: SGD at 0.1, momentum 0.9, weight decay 5e-4) are
  what a family reproduces.

`weight_decay` means the same for both: L2 regularisation added to the gradient before the
optimizer sees it, g <- g + weight_decay x w, for every trainable variable (biases and
normalisation scales too) — PyTorch's `weight_decay` of SGD and of Adam. With Adam this is not
AdamW's decoupled decay (Loshchilov & Hutter 2019; Keras's `weight_decay` argument), which
shrinks the weights outside the adaptive step: the term passes through Adam's moments here.

The optimizer's variables (its iteration count, learning rate and the buffers, in Keras's order)
are what train_state.npz saves with each step (reportgen.training.run_state), so a resumed run
continues with the same buffers.
"""

from __future__ import annotations

import keras
from keras import ops


def make_optimizer(training, learning_rate: float):
    """The Keras optimizer of `training` (TrainingParams) at `learning_rate`."""
    if training.optimizer == "sgd":
        return SGD(learning_rate, momentum=training.momentum,
                   weight_decay=training.weight_decay)
    if training.weight_decay:
        return AdamL2(learning_rate, weight_decay=training.weight_decay)
    return keras.optimizers.Adam(learning_rate)


def describe(training) -> str:
    """The optimizer in words, as the console says it: "Adam", "SGD, momentum 0.9, weight decay
    0.0005 (L2)"."""
    parts = ["SGD" if training.optimizer == "sgd" else "Adam"]
    if training.optimizer == "sgd":
        parts.append(f"momentum {training.momentum:g}")
    if training.weight_decay:
        parts.append(f"weight decay {training.weight_decay:g} (L2)")
    return ", ".join(parts)


def _with_l2(gradient, variable, weight_decay: float):
    """g + weight_decay x w, in the variable's dtype."""
    gradient = ops.cast(gradient, variable.dtype)
    if not weight_decay:
        return gradient
    return ops.add(gradient, ops.multiply(ops.cast(weight_decay, variable.dtype), variable))


class SGD(keras.optimizers.Optimizer):
    """PyTorch's SGD (module docstring): b <- momentum x b + (g + weight_decay x w),
    w <- w - learning_rate x b."""

    def __init__(self, learning_rate=0.01, momentum: float = 0.9, weight_decay: float = 0.0,
                 name: str = "sgd", **kwargs):
        # Keras's own `weight_decay` is decoupled: this one is kept apart, as an L2 gradient
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)
        if not 0 <= momentum < 1:
            raise ValueError(f"momentum must be in [0, 1). Received: {momentum}")
        if weight_decay < 0:
            raise ValueError(f"weight_decay must be >= 0. Received: {weight_decay}")
        self.momentum = float(momentum)
        self.l2_weight_decay = float(weight_decay)

    def build(self, variables):
        if self.built:
            return
        super().build(variables)
        self.momentums = (self.add_optimizer_variables(variables, "momentum")
                          if self.momentum else [])

    def update_step(self, gradient, variable, learning_rate):
        learning_rate = ops.cast(learning_rate, variable.dtype)
        step = _with_l2(gradient, variable, self.l2_weight_decay)
        if self.momentum:
            buffer = self.momentums[self._get_variable_index(variable)]
            step = ops.add(ops.multiply(buffer, ops.cast(self.momentum, variable.dtype)), step)
            self.assign(buffer, step)
        self.assign_sub(variable, ops.multiply(step, learning_rate))

    def get_config(self):
        return {**super().get_config(), "momentum": self.momentum,
                "weight_decay": self.l2_weight_decay}


class AdamL2(keras.optimizers.Adam):
    """Keras's Adam on g + weight_decay x w (PyTorch's Adam `weight_decay`; module docstring).
    Named "adam": its variables are Adam's, named as Adam's."""

    def __init__(self, learning_rate=0.001, weight_decay: float = 0.0, name: str = "adam",
                 **kwargs):
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)
        if weight_decay < 0:
            raise ValueError(f"weight_decay must be >= 0. Received: {weight_decay}")
        self.l2_weight_decay = float(weight_decay)

    def update_step(self, gradient, variable, learning_rate):
        super().update_step(_with_l2(gradient, variable, self.l2_weight_decay), variable,
                            learning_rate)

    def get_config(self):
        return {**super().get_config(), "weight_decay": self.l2_weight_decay}
