"""The domain operations: threads, objectives, repository setup, doctor, gc and the merge drivers."""
