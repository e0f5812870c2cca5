"""`reportgen build`'s options checked against each chosen model before anything is written:
the steps `--steps` lists are saved, the `--images` indices lie in the model's test split, and
an `--eval-images` larger than that split is said (the evaluation then uses the whole split).

A model that cannot be checked (an invalid params.toml, a data set that cannot be loaded) is
left to the build, which reports it as failed and builds the others; an option that does not
fit a model refuses the whole build (exit 2), since the command line asked for what is not
there.
"""

from __future__ import annotations

from reportgen import console
from reportgen.errors import ReportgenError


def check_options(entries, settings) -> None:
    """Raise a one-line ReportgenError, naming the model, for the first option that does not
    fit one of `entries`; notices for what the build will do instead of what was asked."""
    from reportgen.data.datasets import load_dataset
    from reportgen.data.inputs import make_inputs

    for entry in entries:
        try:
            params = entry.params
            steps = entry.steps
        except ReportgenError:
            continue                    # an invalid model: the build reports it as failed
        try:
            if not settings.chosen_steps(steps):
                continue                # untrained: the build lists it as skipped
        except ReportgenError as exc:
            raise _for_model(entry.name, exc) from None
        try:
            dataset = load_dataset(params.dataset)
        except ReportgenError:
            continue                    # the model's own failure, said when it is built
        try:
            make_inputs(dataset, list(settings.images), [], [], params.input_shape)
        except ReportgenError as exc:
            raise _for_model(entry.name, exc) from None
        size = len(dataset.x_test)
        if settings.eval_images is not None and settings.eval_images > size:
            console.notice(f"--eval-images {settings.eval_images:,} is more than the "
                           f"{size:,} test images of {dataset.name}: the evaluation uses all "
                           f"{size:,}.")


def _for_model(name: str, exc: ReportgenError) -> ReportgenError:
    return ReportgenError(f"{exc.what.rstrip('.')} (model {name})", expected=exc.expected,
                          received=exc.received, fix=exc.fix)
