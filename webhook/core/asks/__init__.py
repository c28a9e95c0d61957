"""Reading what a pod asks for: the checks (what can never run), its canonical GPU asks (demand), and its
DRA claims (claims, their CEL selectors, a pod's claims as a whole)."""
