"""reportgen's own model families, one package each, laid out as a third-party family's package
is (examples/idpa_capsnet/): `reportgen.families.<name>` declares `FAMILY` (a reportgen.sdk.Family:
settings, description, parameter count; no TensorFlow), `<name>.network` builds its Keras model,
`<name>.layers` and `<name>.routing` hold its own layers and routing, and `<name>.tests` its
tests. Each is registered by its entry point in pyproject.toml (`reportgen.families` group), and
listed from this package when reportgen runs from a source tree without its metadata."""
