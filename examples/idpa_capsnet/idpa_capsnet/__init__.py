"""Capsules with inverted dot-product attention routing (Tsai, Srivastava, Goh & Salakhutdinov,
ICLR 2020) as a reportgen model family, found by reportgen through the entry point in
pyproject.toml:

    idpa_capsnet.family   FAMILY: settings, description, parameter count (no TensorFlow)
    idpa_capsnet.layers   the Keras layers (primary poses, ConvCaps, ClassCaps, the readout)
    idpa_capsnet.network  the Keras model with its routing iterations unrolled, and its loss

Importing this package imports nothing else (reportgen loads the entry point it needs).
"""
