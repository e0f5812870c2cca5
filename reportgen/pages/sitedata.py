"""The site's structure as plain data: what `build` hands to the page renderer.

All paths are relative to the MkDocs docs folder (e.g. "artifacts/MNIST_Demo/5-40/test-3/rpv-modified.png").
Nothing here knows about TensorFlow or the cache. Numbers travel with their panels
(`Panel.numbers`, `FigureFile.source`): pages never read them back from the docs folder.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# A field's metadata key: False keeps the field out of the site's record and digest
# (reportgen.commands.site_changes).
RECORDED = "recorded"

@dataclass
class FigureFile:
    kind: str                 # "png" | "svg" | "pdf" | "json" | "csv" | "bin" | "js"
    path: str                 # where the page links it (docs-relative)
    width: int = 0
    height: int = 0
    source: str = ""          # the file's bytes in the artifact store (read these, not `path`)


@dataclass
class Panel:
    """One technique result for one (step, input) or one step (checkpoint scope)."""

    technique: str            # registry name, e.g. "rpv" (also the URL anchor)
    variant: str              # e.g. "modified", "conv1", "" (the default/only one)
    title: str                # e.g. "Routing Path Visualization (modified)"
    layer: str                # "model" | "conv" | "primary" | "class" | "decoder"
    caption: str              # model, step, input, technique, options, normalisation
    figures: list[FigureFile] # first is the PNG shown; others are downloads (SVG/PDF/extra PNG)
    experimental: bool = False
    # The panel's numbers as JSON-ready data, handed on by its technique (`Technique.numbers`,
    # kept in the artifact store beside the figures): a dataset analysis's summary (what its
    # JSON/CSV downloads hold), class capsules' poses and lengths, the live decoder's manifest;
    # None when the technique hands on none.
    numbers: dict | None = None
    # The training filmstrip's frame of this result: the same panel drawn on one colour scale
    # shared by every step (`shared_range`, vmin … vmax); None when the technique's scale is
    # not set by the data.
    shared: "Panel | None" = None
    shared_range: tuple[float, float] | None = None
    # Bulky data one page reads (`Technique.data`: the live decoder's quantised weights), in
    # memory only: not part of the site's record or digest (RECORDED False).
    data: dict | None = field(default=None, repr=False, metadata={RECORDED: False})
    # Why the technique failed here (one line; no figures then): a failing technique fails
    # alone, and its card says so while the rest of the model is shown.
    failed: str = ""


@dataclass
class InputInfo:
    key: str                  # e.g. "test-12-rot90" (file-name/URL safe)
    label: str                # e.g. "test #12 (rotate 90°)"
    image: str                # path of the input as the model saw it (PNG)
    true_class: str | None    # class name or None for user images without label
    digest: str = ""          # figures.encode.pixel_digest of the image as the model saw it


@dataclass
class Prediction:
    predicted: str            # class name
    confidence: float         # the predicted class's score (ModelData.words["score"] says what)
    correct: bool | None      # None when the true class is unknown


@dataclass
class StepData:
    step: str                                   # "EPOCH-BATCH"
    # input key -> panels for that input at this step (page order = technique registry order)
    input_panels: dict[str, list[Panel]] = field(default_factory=dict)
    predictions: dict[str, Prediction] = field(default_factory=dict)   # input key -> prediction
    checkpoint_panels: list[Panel] = field(default_factory=list)       # e.g. conv kernels
    # evaluation at this step (may be None when not computed)
    accuracy: float | None = None
    per_class_accuracy: list[float] | None = None
    confusion_matrix: list[list[int]] | None = None   # rows = true class, cols = predicted
    # images of two digits (no confusion matrix): the evaluation's size and its most often
    # predicted pair (reportgen.pages.assemble.predicted_pairs); None for one class per image
    predicted_pair: dict | None = None
    # dataset-level analyses over the evaluation set at this step, page order
    dataset_panels: list[Panel] = field(default_factory=list)
    # the confusion matrix as paper figures (PNG, SVG, PDF, CSV), linked from the overview
    downloads: list[FigureFile] = field(default_factory=list)


@dataclass
class ArchitectureRow:
    layer: str
    kind: str                 # "Conv2D", "PrimaryCaps", "ClassCaps", "Dense", ...
    output_shape: str
    params: int               # trainable
    non_trainable: int = 0    # e.g. BatchNorm's moving statistics


@dataclass
class ModelData:
    name: str
    dataset: str              # human description of the data source
    description: str
    params: int               # trainable parameters
    class_names: list[str]
    architecture: list[ArchitectureRow]
    history: list[dict]       # training history records (see reportgen/training/trainer.py)
    steps: list[StepData]     # built steps in training order
    inputs: list[InputInfo]
    latest_val_accuracy: float | None = None
    best_val_accuracy: float | None = None
    errors: list[str] = field(default_factory=list)   # what failed for this model during build
    # techniques that do not apply to this model's kind, with why (e.g. "no decoder"): pages
    # say "not applicable to this model" instead of leaving a gap. [{technique, title, layer,
    # reason}]
    not_applicable: list[dict] = field(default_factory=list)
    # dataset-level numbers over training steps (one panel per analysis), static
    trend_panels: list[Panel] = field(default_factory=list)
    # the training curves as paper figures (PNG, SVG, PDF, CSV), linked from the overview
    downloads: list[FigureFile] = field(default_factory=list)
    # how the model was trained (reportgen/training/run_info.py FIELDS: data set, training
    # images, epochs, batch size, learning rate, wall time, ...; None = not recorded)
    training: dict = field(default_factory=dict)
    # the model's kind in Gu 2022's tables ("CapsNet", "ConvNet-Avg", ...; see
    # reportgen/results/capsules_vs_cnns.py), "" when unknown
    kind: str = ""
    # an imported model's steps: the file each was converted from and its SHA-256, as
    # `reportgen import` recorded them ([{step, file, sha256, layout, project}])
    sources: list[dict] = field(default_factory=list)
    # classes named per image: 1, or 2 for images of two overlapping digits (MultiMNIST),
    # whose accuracy is top-2 (reportgen.data.label_arity)
    labels_per_image: int = 1
    # the BibTeX entries its family declares for it (Family.citations_for): cited on its
    # pages, "About the methods" and the supplement's references.bib
    citations: list[str] = field(default_factory=list)
    # what the model's description leaves out (ModelDescription.leaves_out), said on its pages
    leaves_out: list[str] = field(default_factory=list)
    # which images its pages score as held out, and how many (reportgen.data.held_out), and
    # for a run of an older reportgen whose split held some of them among its training
    # images, how many: every page of the model says so
    held_out: str = ""
    # the author's own words about the model: the Markdown of its folder's README.md ("" when
    # it has none), shown at the top of its pages and carried into the supplement
    notes: str = ""
    held_out_warning: str | None = None
    test_images: int = 0      # the held-out split's size (0: unknown)
    # routing iterations of its routed layers (1: uniform couplings); None: no iterative
    # routing (a CNN, GraCapsNet's attention, self-routing) or not known
    routing_iterations: int | None = None
    # how it scores and predicts, in words from its description (what it predicts by, what
    # its gradients are of, its routing weights' name: reportgen.capsnet.model_words.words_of),
    # for the pages and findings; {} (neutral words) when not known
    words: dict = field(default_factory=dict)
    # a run of a group (`reportgen train NAME --seeds/--sweep`): its group.json, {group, base,
    # settings (the settings that differ from the base's), seed}; None for a model of its own
    group: dict | None = None


@dataclass
class BuildFailure:
    """Something the build could not make, shown on Home: a model (or "MODEL step E-B")
    and the one-line reason."""

    subject: str
    reason: str


@dataclass
class SiteData:
    title: str
    models: list[ModelData]
    # [{name, title, layer, description, experimental, citations}] in page order
    techniques: list[dict]
    generated_by: str = "reportgen"
    # dataset-level analyses with the models overlaid (each model at its last built step)
    compare_panels: list[Panel] = field(default_factory=list)
    # models and steps that failed in this build (the rest was built)
    failures: list[BuildFailure] = field(default_factory=list)
