"""What `reportgen build` is about to do for one model, said before it starts: the steps, the
inputs, where the dataset analyses run and over how many evaluation images (fitted to a time
budget unless given), and an approximate time for a build that finds nothing in the store.

The estimate scales times measured for MNIST_Demo on a 2-core CPU (README, Benchmarks) by the
model's trainable parameter count; it is a rough guide, said so on the line.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from reportgen.commands.build_settings import (FAMILY_SECONDS_PER_EVAL_IMAGE,
                                               seconds_per_eval_image)

DEMO_PARAMS = 2.117e6       # MNIST_Demo's trainable parameters, the measured reference
PER_ITEM_S = 0.06           # per (step, input): probe pass and drawing, MNIST_Demo
PER_STEP_S = 0.5            # per step: checkpoint load, checkpoint-scope techniques, pages


@dataclass(frozen=True)
class ModelPlan:
    model: str
    steps: list                 # the chosen steps, in training order
    analysed: list              # the steps with dataset analyses
    inputs: int
    eval_images: int
    fitted: bool                # eval_images chosen by the budget (no --eval-images)
    trainable_params: int
    family: str = "capsnet"     # params.toml's family: EM routing costs more than its size says

    def with_eval_images(self, count: int) -> "ModelPlan":
        """The plan with the evaluation set's real size (a test split can be smaller)."""
        return replace(self, eval_images=count)

    def seconds(self) -> float:
        """Approximate cold-build time (nothing in the store yet)."""
        scale = max(self.trainable_params, 1) / DEMO_PARAMS
        per_item = PER_ITEM_S * max(1.0, scale)
        analyses = (len(self.analysed) * self.eval_images
                    * seconds_per_eval_image(self.trainable_params, self.family))
        return len(self.steps) * (PER_STEP_S + self.inputs * per_item) + analyses

    def line(self) -> str:
        steps = _steps(self.steps)
        if self.analysed:
            where = (f"dataset analyses at {len(self.analysed)} step"
                     f"{'s' if len(self.analysed) != 1 else ''} ({', '.join(map(str, self.analysed))})")
        else:
            where = "no dataset analyses"
        over = (f"{self.eval_images} evaluation images"
                + (" (fitted to the time budget; --eval-images to choose)" if self.fitted else ""))
        return (f"{self.model}: {steps}, {self.inputs} input{'s' if self.inputs != 1 else ''}, "
                f"{where}, {over}; about {_duration(self.seconds())} if nothing is cached "
                f"(estimated from {self.trainable_params:,} parameters"
                + (f" and the {self.family} family's measured cost"
                   if self.family in FAMILY_SECONDS_PER_EVAL_IMAGE else "") + ")")


def _steps(steps: list) -> str:
    if len(steps) == 1:
        return f"step {steps[0]}"
    return f"{len(steps)} steps ({steps[0]} … {steps[-1]})"


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{max(5, round(seconds / 5) * 5):.0f} s"
    return f"{round(seconds / 60):.0f} min"
