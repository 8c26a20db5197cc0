"""Framework-independent parts of the chorus package."""
