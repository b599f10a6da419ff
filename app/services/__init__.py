"""Service layer: loads catalog and calibration from the database, calls the core, saves results."""
