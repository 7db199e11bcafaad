"""leslie's end-to-end suite: the real agent clients against mock model servers on 127.0.0.1."""
