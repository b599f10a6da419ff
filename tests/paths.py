"""Paths shared by the tests, wherever their file sits under tests/."""

from __future__ import annotations

from pathlib import Path

TESTS_DIR = Path(__file__).resolve().parent
ROOT = TESTS_DIR.parent
DATA_DIR = TESTS_DIR / "data"
VENDOR_DIR = TESTS_DIR / "vendor"
FAULT_INJECTION_DIR = TESTS_DIR / "fault_injection"
EXAMPLES_DIR = ROOT / "examples"
