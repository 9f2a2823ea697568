"""interventions layer."""
