"""Running and emitting commands: the passthrough launcher, torchrun / Slurm emission, command-line
recipes (a torchrun line as the recipe) and torchrun's own option table."""
