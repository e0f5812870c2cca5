"""`reportgen import`: turn a CapsNet checkpoint trained elsewhere into a model folder (the work
is reportgen.importers')."""

from __future__ import annotations

from pathlib import Path

import click

from reportgen.importers import LAYOUTS


@click.command("import")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--from", "source", required=True, type=click.Choice(sorted(LAYOUTS)),
              help="The project that saved FILE: capsnet-keras (XifengGuo/CapsNet-Keras, "
                   ".h5), gram-ai (gram-ai/capsule-networks) or udacity (the Udacity-style "
                   "Capsule_Network notebook); PyTorch files as .pt/.pth or .safetensors.")
@click.option("--name", help="Model folder name [DATASET_CapsNetKeras / _GramAI / _Udacity].")
@click.option("--step", help="Training step E-B to save it as, to place several checkpoints of "
                             "one run [1-0, then the next epoch after the model's last step].")
@click.option("--dataset", help="Dataset name or path, as for `train --data` [mnist for "
                                "28x28x1, cifar10 for 32x32x3].")
@click.option("--routing-iterations", type=click.IntRange(min=1),
              help="Routing iterations the source used (files do not store it) [3].")
@click.pass_context
def command(ctx, file, source, name, step, dataset, routing_iterations):
    """Import a CapsNet checkpoint trained by another implementation as models/NAME/.

    The weights are converted exactly into reportgen's CapsNet (its params.toml says where the
    source's architecture differs) and saved as one training step; every analysis and page
    then works on it.

    \b
    Examples:
      reportgen import result/trained_model.h5 --from capsnet-keras
      reportgen import epochs/epoch_10.pt --from gram-ai --name MNIST_GramAI --step 10-600
      reportgen import capsule_net.safetensors --from udacity
    """
    from reportgen.catalog import default_models_dir
    from reportgen.console import echo, notice
    from reportgen.importers import import_checkpoint
    from reportgen.os_errors import said_in_one_line

    models_dir = (ctx.obj.get("models_dir") if ctx.obj else None) or default_models_dir()
    # the converted weights take about what the source's float32 tensors took
    with said_in_one_line(lambda: Path(file).stat().st_size, path=models_dir,
                          fix="free space on that disk, or import into a models folder on "
                              "another disk (--models-dir)"):
        result = import_checkpoint(models_dir, file, source, name=name, step=step,
                                   dataset=dataset, routing_iterations=routing_iterations)
    model = f"the new model {result.name}" if result.created else f"model {result.name}"
    echo(f"Imported {click.format_filename(file)} ({source}, {result.parameters:,} parameters) "
         f"as step {result.step} of {model}: {result.folder.weights_path(result.step)}")
    if result.dataset_guessed:
        notice(f"Dataset {result.params.dataset!r} chosen from the "
               f"{'x'.join(map(str, result.params.input_shape))} input; edit 'dataset' in "
               f"{result.folder.params_path} if the model was trained on other data.")
    echo(f"Look at it: reportgen build --models {result.name}")
