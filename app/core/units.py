"""Unit constants. Core values are SI base units; conversion happens only at the edges."""

KiB = 2**10
MiB = 2**20
GiB = 2**30
TiB = 2**40
KB = 10**3
MB = 10**6
GB = 10**9  # bandwidths are shown in GB/s (10^9 bytes/s), as nccl-tests does
TB = 10**12
TFLOP = 10**12  # compute is shown in TFLOP/s (10^12 FLOP/s), dense
GBIT = 10**9 / 8  # bytes in one gigabit (NIC speeds are quoted in Gb/s)
US = 1e-6
MS = 1e-3
HOUR = 3600.0
DAY = 86400.0
