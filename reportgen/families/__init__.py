"""The model families, one module each: every module here declares `FAMILY` (a
reportgen.settings.families.Family), which the registry finds by listing this package. Adding a
family is adding a module here (and its Keras layers, if new, in reportgen.capsnet)."""
