"""Darknet layer types beyond the core set (:mod:`yolo.models.layers`, built by :mod:`yolo.models.builders`), one
small module each.

Each module defines its ``nn.Module`` and registers its builder in
:data:`yolo.models.layer_types.registry.BUILDERS`; :mod:`yolo.models.builders` imports them all.
"""
