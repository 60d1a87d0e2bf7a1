"""The probe: the child that fills MPS, the run that watches it, the verdict, calibration."""
