"""Numbers read across techniques: the bibliography (references), the findings, the baselines
and Gu's capsules-versus-CNNs comparison, and what of single techniques' numbers those read
(technique_numbers). A technique's own array orders, key names, labels and measures are in its
package (reportgen/techniques/<name>/numbers.py), beside its compute and its figures."""
