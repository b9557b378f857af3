"""The oracle: the reference interpreter on the untransformed kernel, and the one
comparison of a run's outputs with it (:mod:`polyc.verify`)."""
