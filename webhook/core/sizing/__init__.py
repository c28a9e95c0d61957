"""Right-sizing: from what pods used to the smallest ask that holds it (`gpuport rightsize`)."""
