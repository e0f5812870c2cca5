"""Efficient-CapsNet (Mazzia, Salvetti & Chiaberge 2021, self-attention routing) as a reportgen
model family, found by reportgen through the entry points in pyproject.toml:

    efficient_capsnet.family     FAMILY: settings, description, parameter count (no TensorFlow)
    efficient_capsnet.layers     the Keras layers (squash, primary capsules, FCCaps)
    efficient_capsnet.network    the Keras model, its loss and learning-rate schedule
    efficient_capsnet.technique  TECHNIQUE: the routing's coupling coefficients per input
    efficient_capsnet.figures    its drawing

Importing this package imports nothing else (reportgen loads the entry points it needs).
"""
