"""The sizes of a PDF's text as printed in the supplement (reportgen.figures.print_size): each
string's font size times the scale of its text and transformation matrices, times the scale
captions.tex prints the figure at."""

from __future__ import annotations

import io

import numpy as np


def _matrix(a, b, c, d, e, f) -> np.ndarray:
    return np.array([[a, b, 0.0], [c, d, 0.0], [e, f, 1.0]])


def text_sizes(pdf: bytes) -> list[tuple[str, float]]:
    """(text, size in pt on the PDF's page) of every string the page shows."""
    import pikepdf

    out = []
    with pikepdf.open(io.BytesIO(pdf)) as doc:
        page = doc.pages[0]
        ctm, stack = np.eye(3), []
        tm, size = np.eye(3), 0.0
        for operands, operator in pikepdf.parse_content_stream(page):
            op = str(operator)
            if op == "q":
                stack.append(ctm.copy())
            elif op == "Q":
                ctm = stack.pop()
            elif op == "cm":
                ctm = _matrix(*map(float, operands)) @ ctm
            elif op == "BT":
                tm = np.eye(3)
            elif op == "Tf":
                size = float(operands[1])
            elif op == "Tm":
                tm = _matrix(*map(float, operands))
            elif op in ("Td", "TD"):
                tm = _matrix(1, 0, 0, 1, float(operands[0]), float(operands[1])) @ tm
            elif op in ("Tj", "TJ", "'", '"'):
                m = (tm @ ctm)[:2, :2]
                scale = abs(np.linalg.det(m)) ** 0.5
                text = operands[-1]
                shown = "".join(str(t) for t in text if isinstance(t, pikepdf.String)) \
                    if isinstance(text, pikepdf.Array) else str(text)
                out.append((shown, size * scale))
    return out


def page_width(pdf: bytes) -> float:
    import pikepdf

    with pikepdf.open(io.BytesIO(pdf)) as doc:
        box = [float(v) for v in doc.pages[0].mediabox]
    return box[2] - box[0]
