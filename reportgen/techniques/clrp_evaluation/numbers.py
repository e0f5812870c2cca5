"""What the CLRP evaluation and its drawing share: the methods' order and labels and the
summary keys (from reportgen.results.technique_numbers: the findings read them too), the
paired differences recorded."""

from __future__ import annotations

from reportgen.results.technique_numbers import CLRP_DISCRIMINATIVE as DISCRIMINATIVE
from reportgen.results.technique_numbers import CLRP_LABELS as LABELS
from reportgen.results.technique_numbers import CLRP_METHODS as METHODS
from reportgen.results.technique_numbers import clrp_disc_key as disc_key
from reportgen.results.technique_numbers import clrp_drop_key as drop_key
from reportgen.results.technique_numbers import clrp_pointing_key as pointing_key

# the paired differences (a - b) the summary records, with their intervals
DISC_PAIRS = (("clrp1", "lrp"), ("clrp2", "lrp"))
DROP_PAIRS = (("gradient", "random"), ("lrp", "gradient"), ("clrp1", "lrp"), ("clrp2", "lrp"))

