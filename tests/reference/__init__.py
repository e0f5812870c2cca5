"""Plain-NumPy reference implementations (test oracles). They never import reportgen."""
