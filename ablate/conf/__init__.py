"""ablate's built-in Hydra configs (``pkg://ablate.conf``): ablate_base.yaml, ablate.yaml, launcher/."""
