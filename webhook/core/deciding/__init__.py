"""Deciding an admission review: the envelope (review, decision), the memo's key, the decision (admission)
and the pipeline that puts the checks, the gates and the translation in order."""
