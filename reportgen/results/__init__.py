"""What the arrays and summaries of an analysis mean: array orders, key names, labels and the
measures derived from them, shared by the technique that computes them (reportgen.techniques)
and the figures that draw them (reportgen.figures), so that figures never import techniques."""
