"""The `gpuport` commands: each wires adapters, config and core together for one job. `cli` registers
them; `app` builds the admission server that `serve` runs."""
