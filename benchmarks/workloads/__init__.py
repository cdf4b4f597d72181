"""One module per workload; each holds its data, its metric and its implementations."""
