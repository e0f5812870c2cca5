"""The `reportgen build` command's options."""

from __future__ import annotations

import click


@click.command("build")
@click.option("--models", "models", default="*", show_default=True,
              help="Glob over model names, e.g. 'MNIST_*', or several separated by commas: "
                   "'MNIST,MNIST_Demo,MNIST_EM'; an entry that matches no model is refused.")
@click.option("--drop-model", "drop_models", multiple=True, metavar="NAME",
              help="Remove this model from the site (repeatable, or NAME,NAME). Without it a "
                   "build keeps every model the site already shows, drawn from the artifact "
                   "store, and adds or rebuilds the --models ones.")
@click.option("--only", is_flag=True,
              help="The site shows only the models --models chooses: every other model it "
                   "showed is removed (said).")
@click.option("--steps", default="all", show_default=True,
              help="all | last | every:N | a list such as 1-40,5-40.")
@click.option("--images", default="test:0-15", show_default=True,
              help="Test-split indices: test:0-15, test:3,7,9-11, or none.")
@click.option("--image", "files", multiple=True, type=click.Path(dir_okay=False),
              help="An image file of yours (PNG/JPEG/GIF/BMP, any size); repeatable.")
@click.option("--transforms", default="", help="Extra versions of every input: rotate:ANGLE, "
                                               "invert, rotate:90+invert; comma-separated.")
@click.option("--technique", "techniques", multiple=True,
              help="Only these techniques (repeatable); default: all non-experimental.")
@click.option("--experimental", is_flag=True, help="Include activation maximization.")
@click.option("--analyses", default="spread", show_default=True,
              help="Steps that get the dataset-level analyses (routing entropy, fidelity, "
                   "robustness): spread = 5 chosen steps spread over training (spread:N for "
                   "N), last, all chosen steps, or none; 0-0 always when saved.")
@click.option("--eval-images", type=click.IntRange(min=10), default=None,
              help="Test images for accuracy, the confusion matrix and the dataset analyses "
                   "(stratified; all of the test split, said, when it has fewer); default: "
                   "fitted to about 2.5 minutes of analyses per model.")
@click.option("--batch-size", type=click.IntRange(min=1), default=16, show_default=True,
              help="Images per probe pass; lowered (and said) to one whose activations fit "
                   "in this machine's memory (the results are the same).")
@click.option("--technique-seconds", type=int, default=None, metavar="N",
              help="Stop a technique that computes longer than N seconds at one step: it "
                   "fails alone, said in one line on its cards and in the summary, nothing of "
                   "it is stored, the others are built. Default: 30 min, or 10 s per image it "
                   "computes over when more. A technique computing for over 30 s is named in a "
                   "line every minute. No hard limit on a Dask cluster's workers or on Windows "
                   "(the line only).")
@click.option("--site-dir", default="site", show_default=True, type=click.Path(file_okay=False),
              help="Output folder, replaced once the build succeeded; it must be absent, "
                   "empty or a site reportgen made holding only the files it wrote (never the "
                   "models folder or the project folder). Missing parent folders are created.")
@click.option("--no-wait", is_flag=True,
              help="If another build is writing the same site folder, stop (exit 2) instead "
                   "of waiting for it.")
@click.option("--cache-dir", default=None, type=click.Path(file_okay=False),
              envvar="REPORTGEN_CACHE",
              help="Artifact store: a folder, or an fsspec URL (s3://bucket/prefix, gs://, "
                   "file://, memory://) [.reportgen/cache]. A new or empty folder or a store; "
                   "never the models folder, a model's or the site folder, or a folder inside "
                   "one.")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="Compute the steps on a Dask cluster: tcp://HOST:8786 (a running scheduler) "
                   "or local:N (N worker processes here); default in this process.")
@click.option("--templates", "templates_dir", default=None,
              type=click.Path(file_okay=False, exists=True),
              help="Your templates folder; its files override the bundled ones by name.")
@click.option("--config", "config_file", type=click.Path(dir_okay=False, exists=True),
              help="A TOML file whose [build] table sets any of these options (names with "
                   "underscores, e.g. eval_images = 200); options given on the command line win.")
@click.pass_context
def command(ctx, config_file, **options):
    """Compute every analysis for the chosen models, steps and images, and build site/.

    Results are cached by content: a second identical build computes nothing. The site keeps
    the models it already shows: building another model adds it beside them (they are drawn
    from the store, not computed again); --drop-model NAME or --only removes them.

    \b
    Examples:
      reportgen build --models 'MNIST_*' --steps last --images test:0-15
      reportgen build --models FASHION_MNIST       # site/ keeps MNIST_Demo, adds FASHION_MNIST
      reportgen build --models FASHION_MNIST --drop-model MNIST_Demo
      reportgen build --models MNIST_Demo --image cat.png --transforms rotate:90,invert
      reportgen build --config build.toml      # [build] models = "MNIST_*", steps = "every:5"
      reportgen build --scheduler local:2 --cache-dir s3://bucket/reportgen
    """
    from reportgen.commands.build import load_build_config, run_build

    if config_file:
        from click.core import ParameterSource

        for key, value in load_build_config(config_file).items():
            if ctx.get_parameter_source(key) != ParameterSource.COMMANDLINE:
                options[key] = value
    options["files"] = tuple(options["files"])
    options["techniques"] = tuple(options["techniques"])
    options["drop_models"] = tuple(options["drop_models"])
    run_build(models_dir=ctx.obj["models_dir"], **options)
