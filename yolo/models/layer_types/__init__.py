"""Darknet layer types beyond the core set in :mod:`yolo.layers`, one small module each.

Each module defines its ``nn.Module`` and registers its builder in :data:`yolo.layer_types.registry.BUILDERS`;
importing this package registers them all.
"""
from yolo.models.layer_types import registry  # noqa: F401
from yolo.models.layer_types import activation, batchnorm, connected, contrastive, cost, crop, detection, local  # noqa: F401,E401
from yolo.models.layer_types import local_avgpool, reorg3d, scale_channels, shortcut  # noqa: F401,E401
from yolo.models.layer_types import gaussian_yolo  # noqa: F401
from yolo.models.layer_types import recurrent_rnn, recurrent_gru, recurrent_lstm, recurrent_conv_lstm  # noqa: F401,E401
