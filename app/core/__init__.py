"""Pure planning core: no I/O, no web framework, no ORM, no torch.

Inputs are frozen dataclasses in SI base units (bytes, FLOP, seconds, bytes/s); names carry the unit.
"""
