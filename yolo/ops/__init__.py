"""The low-level operations every other package may use; they import no other ``yolo`` package (only the
leaf module :mod:`yolo.errors`).

* :mod:`~yolo.ops.boxes` - box formats (``xyxy``, ``xywh``, ``cxcywh``) and clipping;
* :mod:`~yolo.ops.letterbox` - fitting an image to the network input (Darknet's letterbox and stretch);
* :mod:`~yolo.ops.nms` - Darknet's NMS variants;
* :mod:`~yolo.ops.pixels` - ``uint8`` image batches to the network's float input;
* :mod:`~yolo.ops.postprocess_defaults` - the post-processing defaults (thresholds, ``max_det``), written once;
* :mod:`~yolo.ops.sizes` - network input sizes ``(height, width)`` and the stride check;
* :mod:`~yolo.ops.coco` - COCO's JSON side: category and image ids, ``xywh`` boxes, result dicts.
"""
