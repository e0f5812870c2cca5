"""The shared capsule core: what every model family builds on and every technique reads.

- the description (`description`, no TensorFlow): the capsule vocabulary a family describes
  its network in, and the checks of a network's declarations (`declarations`);
- the network (`network`: the Network a family's build returns, its conv stack, primary
  capsules, decoder and the vector-capsule losses), the capsule ops (`ops`), the losses
  (`losses`), the kernel windows of convolutional capsule layers (`conv_windows`), the layers
  several families share (`layers`: primary capsules, Length, Mask), compiled passes
  (`compiled`, `gradient_pass`), and the words, sizes and parameter counts of a model
  (`model_words`, `footprint`, `architecture`, `param_count`).

The model families themselves live in reportgen/families/<name>/, one package each (its
declaration in `__init__`, its Keras model in `network`, its own layers and routing), as a
third-party family's package does; families and techniques import this core through
`reportgen.sdk`.
"""
