"""YAML to values: cloud maps and the GPU catalogue (schemas, file:line errors), and the decision
context built from them and an inventory. Imports only the core."""
