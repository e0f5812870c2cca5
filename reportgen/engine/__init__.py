"""The analysis engine: plan what is missing for one (model, step), compute it in batches."""
