"""File IO: a root's bytes by URI (local folders and S3), its put-if-absent, the root's probe, and the retry policy.

Nothing here knows the Delta log: this layer moves bytes and answers whether a name was taken.
"""
