"""Rewriting a pod in the target's words: pod-level choices (translate), one ask (translate_ask), the in-
place edits (podedits), DRA claims and their templates (dra), placement hints, and the JSON Patch built
from the edits."""
