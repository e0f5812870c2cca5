"""What `reportgen build` is about to do, said before it starts: per model the steps, the
inputs, where the dataset analyses run and over how many evaluation images (fitted to a time
budget unless given), and an approximate time for a build that finds nothing in the store; then
the whole build's time (reportgen.commands.build_time: measured unit costs per kind of work).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from reportgen.commands.build_time import KINDS, Costs, build_group, duration
from reportgen.settings.families import DEFAULT_FAMILY

MODEL_KINDS = tuple(k for k in KINDS if k != "build")     # the kinds of work of one model
DATASET_KINDS = ("analysed_step", "eval_image")            # the dataset analyses' work
REFERENCE_COSTS = Costs(slowness=1.0, busy=1.0)   # an idle reference machine's (no probe)


@dataclass(frozen=True)
class ModelPlan:
    model: str
    steps: list                 # the chosen steps, in training order
    analysed: list              # the steps with dataset analyses
    inputs: int
    eval_images: int
    fitted: bool                # eval_images chosen by the budget (no --eval-images)
    trainable_params: int
    family: str = DEFAULT_FAMILY   # params.toml's family: some cost more than their size says
    group: str = ""             # its unit costs' group (build_time.cost_group); "" = the family
    # (dataset analyses that apply to it, those asked for): what of the reference costs'
    # dataset work it does (`dataset_analyses`; a MultiMNIST model runs 1 of 9); () = all
    analyses: tuple[int, int] = ()

    def with_eval_images(self, count: int) -> "ModelPlan":
        """The plan with the evaluation set's real size (a test split can be smaller)."""
        return replace(self, eval_images=count)

    @property
    def cost_group(self) -> str:
        return self.group or self.family

    def work(self) -> dict[str, int]:
        """Units of each kind of work (reportgen.commands.build_time.KINDS) of a cold build."""
        return {"model": 1, "step": len(self.steps), "input": len(self.steps) * self.inputs,
                "analysed_step": len(self.analysed),
                "eval_image": len(self.analysed) * self.eval_images}

    def step_work(self, analysed: bool) -> dict[str, int]:
        """Units of work of one of its steps."""
        return {"step": 1, "input": self.inputs, "analysed_step": int(analysed),
                "eval_image": self.eval_images if analysed else 0}

    def share(self, kind: str) -> float:
        """The part of a reference unit cost of `kind` that applies to this model: its share
        of the dataset analyses asked for, for their work; 1 for the rest."""
        applying, asked = self.analyses or (1, 1)
        return applying / asked if kind in DATASET_KINDS and asked else 1.0

    def seconds(self, costs: Costs = REFERENCE_COSTS, work: dict | None = None) -> float:
        """Approximate time of `work` (default: the model's whole cold build, start-up and the
        site aside)."""
        return sum(units * costs.unit(self.cost_group, self.family, kind, self.trainable_params,
                                      self.share(kind))
                   for kind, units in (self.work() if work is None else work).items())

    def line(self, costs: Costs = REFERENCE_COSTS) -> str:
        steps = _steps(self.steps)
        if self.analysed:
            where_analysed = (f"dataset analyses at {len(self.analysed)} step"
                              f"{'s' if len(self.analysed) != 1 else ''} "
                              f"({', '.join(map(str, self.analysed))})")
        else:
            where_analysed = "no dataset analyses"
        applying, asked = self.analyses or (0, 0)
        if self.analyses and applying < asked:
            where_analysed += f" ({applying} of {asked} apply to it)"
        over = (f"{self.eval_images} evaluation images"
                + (" (fitted to the time budget; --eval-images to choose)" if self.fitted else ""))
        from reportgen.settings.families import declares_costs

        if costs.from_here(self.cost_group, MODEL_KINDS):
            whose = f"the {self.family} family's costs measured on this machine"
        elif declares_costs(self.family):
            whose = f"the {self.family} family's costs measured on the reference machine"
        else:      # what the estimate really uses (build_time.reference_seconds)
            whose = (f"the {DEFAULT_FAMILY} family's costs measured on the reference machine; "
                     f"the {self.family} family declares none")
        return (f"{self.model}: {steps}, {self.inputs} input{'s' if self.inputs != 1 else ''}, "
                f"{where_analysed}, {over}; about {duration(self.seconds(costs))} if nothing is "
                f"cached (estimated from {self.trainable_params:,} parameters and {whose})")


def start_and_site_seconds(plans: list[ModelPlan], costs: Costs = REFERENCE_COSTS) -> float:
    """The build's own approximate time: its start-up and its site (no model's work)."""
    return costs.unit(build_group([p.trainable_params for p in plans]), "", "build", 0)


def build_seconds(plans: list[ModelPlan], costs: Costs = REFERENCE_COSTS) -> float:
    """The whole build's approximate cold time: every model's, the start-up and the site."""
    return start_and_site_seconds(plans, costs) + sum(p.seconds(costs) for p in plans)


def whole_build_line(plans: list[ModelPlan], costs: Costs = REFERENCE_COSTS) -> str:
    here = costs.from_here(build_group([p.trainable_params for p in plans]), ("build",)) and all(
        costs.from_here(p.cost_group, MODEL_KINDS) for p in plans)
    source = ("costs measured on this machine" if here else
              f"reference costs, this processor {1 / costs.slowness:.1f}x as fast")
    if costs.busy >= 1.1:
        source += f"; other work running: {costs.busy:.1f}x as long as on an idle machine"
    return (f"Whole build: {len(plans)} model{'s' if len(plans) != 1 else ''}, about "
            f"{duration(build_seconds(plans, costs))} if nothing is cached (start-up and site "
            f"included; {source})")


def _steps(steps: list) -> str:
    if len(steps) == 1:
        return f"step {steps[0]}"
    return f"{len(steps)} steps ({steps[0]} … {steps[-1]})"


def dataset_analyses(chosen) -> tuple[tuple[int, int], tuple[str, ...]]:
    """((dataset analyses that apply, those asked for), the names of those that do not) of a
    model's plan (reportgen.engine.step.plan, the build's own: its variants and what is not
    applicable to the model)."""
    runs = {t.name for t, _ in chosen.variants if t.scope == "dataset"}
    # those the model lacks features for; one that does not suit it (Technique.unsuited: the
    # 40x40 benchmark on 28x28 digits) never ran on such a model, so no cost measured here or
    # on the reference machine included it
    skipped = {t.name for t, missing in chosen.not_applicable
               if t.scope == "dataset" and not isinstance(missing, str)} - runs
    return (len(runs), len(runs | skipped)), tuple(sorted(skipped))
