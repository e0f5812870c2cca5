"""Capsule semantics results: the summary keys other modules read, and the published compactness
reference shown beside ours."""

# Summary keys (capsule_semantics.summarize; the live decoder's "±k σ" slider ranges read them,
# reportgen/pages/live.py):
IMAGES = "images"                  # evaluation images the per-dimension spread is taken over
DIMENSION_STD = "dimension_std"    # [D]: σ of each pose dimension of the predicted class capsule
DIMENSION_VARIANCE = "dim_variance"    # [D]: the same spread as a variance (σ²)

REFERENCE = ("reference values reported for a dynamic-routing CapsNet on MNIST: 0.0021 – "
             "0.0464 across factors, rotation 0.0031 (context, not our result)")
