"""Reading measured GPU use from a Prometheus server's HTTP API (`gpuport rightsize --prometheus`)."""
