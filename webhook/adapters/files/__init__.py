"""Users' manifest files: YAML documents read and edited in place (comments, order and style kept)."""
