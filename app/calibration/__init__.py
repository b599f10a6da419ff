"""Calibration: fit the core's efficiency curves and network parameters to benchmark results.

Pure functions over result documents (app.benchproto.schema): no database, no torch. The output is exactly the
core's own types — `app.core.efficiency.GemmEfficiency`, `app.core.network.NetworkParams` inside an
`app.core.efficiency.HardwareProfile` — so the estimator and planner use a calibrated profile the same way
they use the catalog defaults.
"""
