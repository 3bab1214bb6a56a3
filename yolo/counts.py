"""The largest counts a cfg or a dataset config may ask for, checked before anything is allocated with them.

They lie far above any real model (YOLO9000 has 9,418 classes, the published cfgs at most 9 anchors to a
head and 200 truths an image) so that they refuse only absurd values (``num=100000000`` would allocate
gigabytes of anchors before anything else could say it is wrong).

Here too, so that the detect tool's help can name it without loading torch: the largest batch that inference on
CUDA replays from a captured graph (:mod:`yolo.inference.graphed`), also detect's default batch on CUDA.
"""
MAX_CLASSES = 100_000  # classes of a head, names of a dataset
MAX_ANCHORS = 10_000   # num (anchors of a head), side (YOLOv1 grid cells a side)
MAX_BATCH = 65_536     # images per update (batch) and mini-batches per update (subdivisions)
MAX_IMAGE_SIDE = 8192  # the network input's height and width in training (--img-size allows as much)

# Graphs pay off where launches dominate, i.e. small batches; each captured shape keeps its own activations.
GRAPH_MAX_BATCH = 16

__all__ = ["GRAPH_MAX_BATCH", "MAX_ANCHORS", "MAX_BATCH", "MAX_CLASSES", "MAX_IMAGE_SIDE"]
