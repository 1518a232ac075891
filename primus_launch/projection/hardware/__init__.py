"""The hardware database: GPU specs (``gpus``) and where each parallel group's ranks sit in scale-up
domains and NICs (``placement``)."""
