"""The build's defaults: dataset analyses at steps spread over training, an evaluation set
fitted to a time budget, and the line saying so before the build starts."""

from __future__ import annotations

import pytest

from reportgen.commands.build_plan import ModelPlan
from reportgen.commands.build_settings import (
    ANALYSIS_BUDGET_S, BuildOptions, fitted_eval_images, load_build_config,
    seconds_per_eval_image, settle, spread_count, spread_steps,
)
from reportgen.errors import ReportgenError
from reportgen.model_folder import Step

SAVED = [Step(0, 0)] + [Step(e, b) for e in range(1, 6) for b in (10, 20, 30, 40)]


def test_spread_steps_keep_first_and_last_evenly_between():
    assert [str(s) for s in spread_steps(SAVED, 5)] == ["0-0", "2-10", "3-20", "4-30", "5-40"]
    assert spread_steps(SAVED[:3], 5) == SAVED[:3]          # fewer steps than asked: all
    assert spread_steps(SAVED, 2) == [SAVED[0], SAVED[-1]]


def test_default_build_analyses_five_steps_including_untrained_and_last():
    settings = settle(BuildOptions(steps="every:4"))
    assert settings.analyses == "spread" and settings.eval_images is None
    chosen = settings.chosen_steps(SAVED)
    analysed = [s for s in chosen if settings.analysed(s, chosen)]
    assert len(analysed) == 5 and analysed[0] == Step(0, 0) and analysed[-1] == SAVED[-1]
    last = settle(BuildOptions(analyses="last"))
    assert [s for s in SAVED if last.analysed(s, SAVED)] == [Step(0, 0), SAVED[-1]]
    three = settle(BuildOptions(analyses="spread:3"))
    assert [s for s in SAVED if three.analysed(s, SAVED)] == [SAVED[0], SAVED[10], SAVED[-1]]


@pytest.mark.parametrize("bad", ["spread:1", "spread:x", "some", ""])
def test_invalid_analyses_is_one_line(bad):
    with pytest.raises(ReportgenError, match="Invalid --analyses") as caught:
        spread_count(bad)
    assert "\n" not in caught.value.message


def test_eval_images_fitted_to_the_budget():
    # MNIST_Demo (2.1 M parameters) at 5 steps: 50 images, about the budget
    n = fitted_eval_images(2_117_072, 5)
    assert n == 50
    assert 0.8 * ANALYSIS_BUDGET_S <= 5 * n * seconds_per_eval_image(2_117_072) \
        <= 1.2 * ANALYSIS_BUDGET_S
    assert fitted_eval_images(8_215_568, 5) == 20             # bigger model: the floor
    assert fitted_eval_images(2_117_072, 1) > n               # fewer steps: more images
    assert fitted_eval_images(2_117_072, 0) == 200            # accuracy only: the ceiling
    # EM routing is slow for its 68 k parameters: its measured cost, not the size, decides
    assert fitted_eval_images(68_444, 5) == 200
    assert fitted_eval_images(68_444, 5, "em") == 20
    assert fitted_eval_images(68_444, 1, "em") == 50
    # given explicitly, it is kept and checked
    assert settle(BuildOptions(eval_images=30)).eval_images == 30
    with pytest.raises(ReportgenError, match="Invalid --eval-images"):
        settle(BuildOptions(eval_images=5))


def test_config_eval_images_still_typed(tmp_path):
    config = tmp_path / "build.toml"
    config.write_text('[build]\neval_images = "many"\n')
    with pytest.raises(ReportgenError, match="Invalid 'eval_images'"):
        load_build_config(config)
    config.write_text('[build]\neval_images = 40\nanalyses = "spread:3"\n')
    assert load_build_config(config) == {"eval_images": 40, "analyses": "spread:3"}


def test_plan_line_says_what_and_how_long():
    steps = SAVED[::4] + [SAVED[-1]]
    analysed = spread_steps(steps, 5)
    plan = ModelPlan("MNIST_Demo", steps, analysed, 16, 50, True, 2_117_072)
    line = plan.line()
    assert line.startswith("MNIST_Demo: 7 steps (0-0 … 5-40), 16 inputs, dataset analyses at "
                           "5 steps (0-0, 2-40, 3-40, 4-40, 5-40), 50 evaluation images "
                           "(fitted to the time budget")
    assert ("if nothing is cached (estimated from 2,117,072 parameters and the capsnet "
            "family's costs measured on the reference machine)") in line
    # the estimate grows with the work (tests/test_build_time.py: its arithmetic)
    bigger = ModelPlan("MNIST", steps, analysed, 16, 50, False, 8_215_568)
    assert bigger.seconds() > 3 * plan.seconds()
    assert "fitted" not in bigger.line()
    none = ModelPlan("M", steps[:1], [], 1, 200, True, 1000)
    assert "step 0-0, 1 input, no dataset analyses" in none.line()
    # a family without reference costs of its own is estimated from the default family's, and
    # the line says so (Self-Routing declares none)
    own = ModelPlan("SR", steps, analysed, 16, 50, True, 2_451_904, family="self_routing")
    assert ("the capsnet family's costs measured on the reference machine; the self_routing "
            "family declares none)") in own.line()
