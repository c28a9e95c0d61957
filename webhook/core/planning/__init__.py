"""Planning the target's nodes: which MIG layout each GPU should carry for the slices asked of it."""
