"""`reportgen build`'s options, checked once.

`BuildOptions` is what the command line, a `--config` TOML `[build]` table and the Python API
hand over (plain strings and numbers, as typed). `settle(options)` parses and checks every one
of them, with a one-line error naming the option, and returns `BuildSettings`: frozen, parsed
values that the pipeline reads and never re-checks (README, `reportgen build`).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

from reportgen.engine.time_limit import check_seconds
from reportgen.errors import ReportgenError
from reportgen.model_folder import Step
from reportgen.settings.families import DEFAULT_FAMILY
from reportgen.settings.families import costs as family_costs

DEFAULT_IMAGES = "test:0-15"
ANALYSES = ("spread", "last", "all", "none")     # and spread:N
SPREAD_STEPS = 5         # `spread`: the dataset analyses at this many chosen steps
MIN_EVAL_IMAGES = 10     # a confusion matrix over fewer images says nothing (as the CLI)
# --eval-images left unset: as many images as the dataset analyses at the analysed steps do in
# about this long on a 2-core CPU (fitted_eval_images), within these bounds.
ANALYSIS_BUDGET_S = 150
AUTO_EVAL_IMAGES = (20, 200)
UNTRAINED = Step(0, 0)   # analysed beside the chosen steps: the scores of a random network


@dataclass
class BuildOptions:
    """The options as given (see `reportgen build --help`)."""

    models: str = "*"
    steps: str = "all"                 # all | last | E-B,E-B | every:N
    images: str = DEFAULT_IMAGES       # test:0-15 | test:3,7 | none
    files: tuple[str, ...] = ()        # the user's image files
    transforms: str = ""               # e.g. "rotate:90,invert"
    techniques: tuple[str, ...] = ()   # () = all non-experimental
    experimental: bool = False         # include experimental techniques (activation max.)
    analyses: str = "spread"           # dataset analyses at: spread[:N] | last | all | none
    eval_images: int | None = None     # evaluation set; None: fitted to ANALYSIS_BUDGET_S
    batch_size: int = 16
    technique_seconds: int | None = None   # one technique at one step; None: time_limit's
    site_dir: str = "site"
    no_wait: bool = False              # another build holds the site folder: refuse, not wait
    project_dir: str | None = None     # the MkDocs project, kept [a private, removed folder]
    cache_dir: str | None = None
    templates_dir: str | None = None
    title: str = "reportgen: what the capsules learned"
    render_site: bool = True
    drop_models: str = ""              # models the site shows that it should no longer show
    only: bool = False                 # the site shows only the models --models chose


# --------------------------------------------------------------------------------------------
# Steps


@dataclass(frozen=True)
class StepChoice:
    """A parsed --steps: 'all', 'last', 'every:N' (every Nth saved step, always with the last)
    or a list of steps 'E-B,E-B'."""

    kind: str                          # all | last | every | list
    every: int = 0
    listed: tuple[Step, ...] = ()

    def choose(self, available: list[Step]) -> list[Step]:
        """The chosen steps among a model's saved ones, in training order."""
        if not available:
            return []
        if self.kind == "all":
            return list(available)
        if self.kind == "last":
            return [available[-1]]
        if self.kind == "every":
            chosen = list(available[::self.every])
            return chosen if chosen[-1] == available[-1] else chosen + [available[-1]]
        for step in self.listed:
            if step not in available:
                raise ReportgenError(f"Step {step} was not saved.",
                                     expected=f"one of: {', '.join(map(str, available))}",
                                     fix="use --steps all, last, every:N or listed steps")
        return sorted(set(self.listed))


def parse_steps(spec: str) -> StepChoice:
    spec = str(spec).strip()
    if spec in ("all", "last"):
        return StepChoice(spec)
    if spec.startswith("every:"):
        try:
            n = int(spec[6:])
        except ValueError:
            n = 0
        if n < 1:
            raise ReportgenError("Invalid --steps.", expected="every:N with N >= 1",
                                 received=repr(spec))
        return StepChoice("every", every=n)
    if not spec:
        raise ReportgenError("Invalid --steps.", expected="all, last, every:N or E-B,E-B",
                             received="an empty string")
    return StepChoice("list", listed=tuple(Step.parse(token) for token in spec.split(",")))


def select_steps(available: list[Step], spec: str) -> list[Step]:
    """`parse_steps(spec).choose(available)`."""
    return parse_steps(spec).choose(available)


# --------------------------------------------------------------------------------------------
# The settings


@dataclass(frozen=True)
class BuildSettings:
    """Every build option, parsed and checked."""

    models: str                        # a glob over model names
    steps: StepChoice
    images: tuple[int, ...]            # test-split indices
    files: tuple[str, ...]             # the user's image files (each readable)
    transforms: tuple                  # reportgen.data.inputs.Transform, in order
    techniques: tuple[str, ...]        # technique names, page order
    analyses: str                      # spread[:N] | last | all | none
    eval_images: int | None            # None: fitted per model (fitted_eval_images)
    batch_size: int
    site_dir: str
    no_wait: bool
    project_dir: str | None
    cache_dir: str | None
    templates_dir: str | None
    title: str
    render_site: bool
    drop_models: tuple[str, ...] = ()  # model names, as given
    only: bool = False
    # seconds one technique may compute at one step; None: reportgen.engine.time_limit's default
    technique_seconds: int | None = None

    def chosen_steps(self, available: list[Step]) -> list[Step]:
        """The steps to build: `steps`' choice, plus the untrained step 0-0 when it is saved
        and dataset analyses run, so that every score is shown beside its chance level."""
        chosen = self.steps.choose(available)
        if self.analyses != "none" and chosen and UNTRAINED in available \
                and UNTRAINED not in chosen:
            chosen = [UNTRAINED, *chosen]
        return chosen

    def analysed(self, step: Step, chosen: list[Step]) -> bool:
        """Whether the dataset analyses run at `step` (one of a model's chosen steps): always
        at the untrained step 0-0 unless `analyses` is none."""
        if self.analyses.startswith("spread"):
            return step in spread_steps(chosen, spread_count(self.analyses))
        return self.analyses == "all" or (self.analyses == "last"
                                          and step in (chosen[-1], UNTRAINED))


def settle(options: BuildOptions) -> BuildSettings:
    """Check every option once; the first problem raises a one-line ReportgenError."""
    from reportgen.data.inputs import load_image_file, parse_image_selection, parse_transforms

    models = str(options.models).strip()
    if not models:
        raise ReportgenError("Invalid --models.", expected="a glob over model names, e.g. "
                             "'MNIST_*'", received="an empty string")
    spread_count(options.analyses)          # checks it
    if options.eval_images is not None:
        _check_int("--eval-images", options.eval_images, MIN_EVAL_IMAGES)
    _check_int("--batch-size", options.batch_size, 1)
    technique_seconds = check_seconds(options.technique_seconds)
    steps = parse_steps(options.steps)
    images = tuple(parse_image_selection(options.images))
    transforms = tuple(parse_transforms(options.transforms))
    techniques = _technique_names(tuple(options.techniques), options.experimental)
    files = tuple(str(f) for f in options.files)
    for path in files:          # a missing or unreadable --image: said before any model loads
        load_image_file(path, (8, 8, 1))
    return BuildSettings(
        models=models, steps=steps, images=images, files=files, transforms=transforms,
        techniques=techniques, analyses=options.analyses,
        eval_images=None if options.eval_images is None else int(options.eval_images),
        batch_size=int(options.batch_size), site_dir=str(options.site_dir),
        no_wait=bool(options.no_wait),
        project_dir=None if options.project_dir is None else str(options.project_dir),
        cache_dir=None if options.cache_dir is None else str(options.cache_dir),
        templates_dir=None if options.templates_dir is None else str(options.templates_dir),
        title=str(options.title), render_site=bool(options.render_site),
        drop_models=_drop_models(options.drop_models), only=bool(options.only),
        technique_seconds=technique_seconds)


def _drop_models(value) -> tuple[str, ...]:
    """--drop-model NAME[,NAME] (repeatable): the names, each once, in the order given."""
    given = [value] if isinstance(value, str) else list(value or ())
    names = [n.strip() for text in given for n in str(text).split(",") if n.strip()]
    return tuple(dict.fromkeys(names))


def spread_count(analyses) -> int:
    """How many steps `spread` / `spread:N` analyses (0 for last, all and none); a one-line
    error for anything else."""
    text = str(analyses)
    if text in ANALYSES:
        return SPREAD_STEPS if text == "spread" else 0
    count = text[len("spread:"):] if text.startswith("spread:") else ""
    if not count.isdigit() or int(count) < 2:
        raise ReportgenError("Invalid --analyses.",
                             expected="spread, spread:N (N >= 2), last, all or none",
                             received=repr(analyses))
    return int(count)


def spread_steps(chosen: list, count: int) -> list:
    """`count` of the chosen steps spread evenly over them, the first and the last always
    among them (all of them when there are no more)."""
    if len(chosen) <= count:
        return list(chosen)
    picks = {round(i * (len(chosen) - 1) / (count - 1)) for i in range(count)}
    return [chosen[i] for i in sorted(picks)]


def seconds_per_eval_image(trainable_params: int, family: str = DEFAULT_FAMILY) -> float:
    """Approximate time of the whole dataset-analysis suite per evaluation image and analysed
    step on a 2-core CPU: 0.6 s for MNIST_Demo's 2.1 M parameters, growing as params^1.3 (3.4 s
    measured for the 8.2 M-parameter MNIST baseline; README, Benchmarks); a measured constant
    for the families whose cost their size does not tell (FamilyCosts.seconds_per_eval_image,
    e.g. EM routing). Fixed, so that the fitted evaluation set (and the results' cache keys) is
    the same on every machine; the printed time estimate uses the costs measured on this one
    (reportgen.commands.build_time)."""
    fixed = family_costs(family).seconds_per_eval_image
    if fixed is not None:
        return fixed
    return 0.6 * (max(trainable_params, 1) / 2.117e6) ** 1.3


def fitted_eval_images(trainable_params: int, analysed_steps: int,
                       family: str = DEFAULT_FAMILY) -> int:
    """The evaluation set that keeps the dataset analyses near ANALYSIS_BUDGET_S: a multiple
    of 10 within AUTO_EVAL_IMAGES."""
    low, high = AUTO_EVAL_IMAGES
    if analysed_steps < 1:          # accuracy and confusion matrix only: one cheap pass
        return high
    n = ANALYSIS_BUDGET_S / (analysed_steps * seconds_per_eval_image(trainable_params, family))
    return int(min(high, max(low, round(n / 10) * 10)))


def _check_int(option: str, value, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ReportgenError(f"Invalid {option}.", expected=f"a whole number >= {minimum}",
                             received=repr(value))


def default_techniques() -> tuple[str, ...]:
    """What a build computes without --technique or --experimental."""
    return _technique_names((), False)


def _technique_names(chosen: tuple[str, ...], experimental: bool) -> tuple[str, ...]:
    """The named techniques (each checked), or every non-experimental one (all with
    `experimental`), in page order."""
    from reportgen.techniques import all_techniques, get_technique

    if chosen:
        return tuple(dict.fromkeys(get_technique(n).name for n in chosen))
    return tuple(t.name for t in all_techniques() if experimental or not t.experimental)


# --------------------------------------------------------------------------------------------
# --config FILE


_NOT_IN_CONFIG = ("render_site", "project_dir", "title", "drop_models")
# options whose default (None) does not say their type
_CONFIG_TYPES = {"eval_images": 0, "technique_seconds": 0}


def load_build_config(path) -> dict:
    """The [build] table of a TOML file, checked against the build options' names and types."""
    import tomllib

    try:
        raw = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ReportgenError(f"Build configuration {path} is not valid TOML.",
                             received=str(exc), fix=f"Fix the syntax of {path}.") from exc
    table = raw.get("build")
    if not isinstance(table, dict):
        raise ReportgenError(f"Build configuration {path} has no [build] table.",
                             fix='Put the options under [build], e.g. models = "MNIST_*".')
    known = {f.name for f in fields(BuildOptions)} - set(_NOT_IN_CONFIG)
    defaults = BuildOptions()
    out = {}
    for key, value in table.items():
        name = "files" if key in ("image", "images_files") else key
        if name not in known:
            raise ReportgenError(f"Unknown option '{key}' in {path} [build].",
                                 expected=", ".join(sorted(known)))
        default = _CONFIG_TYPES.get(name, getattr(defaults, name))
        if name in ("files", "techniques"):
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ReportgenError(f"Invalid '{key}' in {path} [build].",
                                     expected="a list of strings", received=repr(value))
            value = tuple(value)
        elif default is not None and (not isinstance(value, type(default))
                                      or isinstance(value, bool) != isinstance(default, bool)):
            raise ReportgenError(f"Invalid '{key}' in {path} [build].",
                                 expected=type(default).__name__, received=repr(value))
        out[name] = value
    return out
