"""Records, exact histograms, per-target statistics, the aggregate of a run and what the client's health makes of it."""
