"""Pure builders: a RayCluster (as the plain camelCase dict read from the apiserver) in, the
child objects KubeRay v1.7 would create out.

Invariants every module here keeps: no I/O, no clock, no randomness (name suffixes and secret
tokens are parameters), and the input dict is never mutated, so the reconciler can call a
builder on an object straight out of the informer cache.
"""
