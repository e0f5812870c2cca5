"""`reportgen build`'s options checked against each chosen model before anything is written:
the steps `--steps` lists are saved, the `--images` indices lie in the model's test split, an
`--eval-images` larger than that split is said (the evaluation then uses the whole split), and
a `--batch-size` whose activations do not fit in this machine's memory is lowered to one that
does, said (the results are the same); a model not even the smallest of the compiled passes'
batches fits is failed by the build (reportgen.capsnet.footprint, reportgen.capsnet.compiled).

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
        try:
            batch = build_batch(params, settings.batch_size, entry.name)
        except ReportgenError:
            continue                    # too large even at the smallest batch: its failure
        if batch < settings.batch_size:
            console.notice(f"{entry.name}: --batch-size {settings.batch_size} would not fit in "
                           f"this machine's memory; its images run {batch} at a time.")
        size = len(dataset.x_test)
        if settings.eval_images is not None and settings.eval_images > size:
            console.notice(f"--eval-images {settings.eval_images:,} is more than the "
                           f"{size:,} test images of {dataset.name}: the evaluation uses all "
                           f"{size:,}.")


def build_batch(params, requested: int, name: str) -> int:
    """The batch a build runs model `name` in: `requested`, or the largest of the compiled
    passes' batch shapes that fits in memory; a one-line ReportgenError when none does."""
    from reportgen.capsnet.compiled import BUCKETS, fitting_bucket
    from reportgen.capsnet.footprint import batch_refusal, largest_batch

    fits = largest_batch(params, training=False)
    if fits < BUCKETS[0]:     # a smaller batch is padded to it: it would take as much
        raise batch_refusal(params, BUCKETS[0], f"building {name}",
                            "make the layers in params.toml smaller")
    return requested if requested <= fits else fitting_bucket(fits)


def _for_model(name: str, exc: ReportgenError) -> ReportgenError:
    return ReportgenError(f"{exc.what.rstrip('.')} (model {name})", expected=exc.expected,
                          received=exc.received, fix=exc.fix)
