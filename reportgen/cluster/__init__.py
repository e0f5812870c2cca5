"""Building on a Dask cluster (README, "Build on a cluster").

The client plans every (model, step) from the parameter files and the store alone
(reportgen.cluster.runner); each step with something missing becomes one task that a worker
computes into the shared artifact store (reportgen.cluster.tasks); the site is then assembled
on the client from the store, exactly as an in-process build assembles it.
"""
