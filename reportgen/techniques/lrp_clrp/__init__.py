"""LRP and contrastive LRP (Gu, Yang & Tresp, ACCV 2018) for the CNN baselines."""
