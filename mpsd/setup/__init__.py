"""Setting mpsd up: the install plan, rc files, launchd, shells, doctor's checks."""
