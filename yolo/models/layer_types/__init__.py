"""Every Darknet layer type, one module each (or one per small family: the recurrent layers, [reorg]):
the ``nn.Module`` and its builder together, the builder registered by the section name(s) it builds with
:func:`yolo.models.layer_types.registry.register`.

Importing this package imports every module in it, so that :data:`yolo.models.layer_types.registry.BUILDERS` then
knows every section type: a new layer type is a new module here, and nothing else lists it. ``registry`` holds the
decorator and the option checks the builders share; ``limits`` and ``head_anchors`` are checks that several
builders use; the head interface is :mod:`yolo.models.heads`.
"""
import importlib
import pkgutil

# Each module registers its builders when it is imported (sorted: the same order on every machine).
for _module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    importlib.import_module(f"{__name__}.{_module}")
