"""Parameters of matrix capsules with EM routing (`family = "em"`; Hinton, Sabour & Frosst 2018).

An EM model reuses `[[conv]]` (the ReLU convolutions before the capsules) and `[primary]`
(`types`, `kernel_size`, `strides` of the convolution forming the primary capsules: 16 pose
values and one logistic activation per type); its own settings are the `[em]` table:

    [em]
    routing_iterations = 3          # T, for every routed layer
    inverse_temperature = 0.01      # lambda; lambda_t = lambda (1 - 0.95^t)
    coordinate_addition = true      # class capsules: add the scaled receptive-field centre
    margin_start = 0.2              # spread loss margin, growing linearly over training ...
    margin_end = 0.9                # ... to this
    kernel_init_stddev = 1.0        # the 4x4 transforms' Normal initialiser
    detach_assignments = false      # true: gradients treat the E-steps' R_ij as constants (faster; learns poorly)
    learning_rate_decay = 0.0       # the learning rate falls linearly by this share over training

    [[em.conv_caps]]                # convolutional capsule layers, in order
    types = 16
    kernel_size = 3
    strides = 2
"""

from __future__ import annotations

from dataclasses import dataclass

EM_FAMILY = "em"


@dataclass(frozen=True)
class ConvCapsParams:
    types: int = 16
    kernel_size: int = 3
    strides: int = 1


@dataclass(frozen=True)
class EMParams:
    conv_caps: tuple[ConvCapsParams, ...] = ()
    routing_iterations: int = 3
    inverse_temperature: float = 0.01
    coordinate_addition: bool = True
    margin_start: float = 0.2
    margin_end: float = 0.9
    kernel_init_stddev: float = 1.0
    detach_assignments: bool = False
    learning_rate_decay: float = 0.0

    def margin(self, progress: float) -> float:
        """The spread-loss margin after `progress` (0 … 1) of training: linear from margin_start
        to margin_end."""
        progress = min(max(float(progress), 0.0), 1.0)
        return self.margin_start + (self.margin_end - self.margin_start) * progress

    def learning_rate_factor(self, progress: float) -> float:
        """1 at the start of training, 1 - learning_rate_decay at its end, linear between."""
        return 1.0 - self.learning_rate_decay * min(max(float(progress), 0.0), 1.0)
