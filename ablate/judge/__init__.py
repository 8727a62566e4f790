"""Judge an ablation: confounds over the manifests, statistics per treatment, verdict.json/.md, the
ablation table, plots, the transfer check and ``--against``."""
