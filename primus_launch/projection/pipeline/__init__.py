"""The pipeline simulator: the schedules' per-rank orders as Megatron-Core and torch.distributed.pipelining
run them (``orders``) and the event simulation of one iteration over them (``simulate``)."""
