"""Command-line interface `clusterplan`."""
