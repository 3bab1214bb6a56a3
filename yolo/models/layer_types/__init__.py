"""Every Darknet layer type, one module each (or one per small family: the recurrent layers, [reorg]):
the ``nn.Module`` and its builder together, the builder registered by the section name(s) it builds with
:func:`yolo.models.layer_types.registry.register`.

Importing this package imports every type module, so that :data:`yolo.models.layer_types.registry.BUILDERS` then
knows every section type. ``registry`` holds the decorator and the option checks the builders share; ``limits`` and
``head_anchors`` are checks that several builders use; the head interface is :mod:`yolo.models.heads`.
"""
from yolo.models.layer_types import (activation, avgpool, batchnorm, connected, contrastive,  # noqa: F401
                                     convolutional, cost, crop, detection, dropout, gaussian_yolo, local,
                                     local_avgpool, maxpool, recurrent_conv_lstm, recurrent_gru, recurrent_lstm,
                                     recurrent_rnn, region, reorg, reorg3d, route, scale_channels, shortcut,
                                     softmax, upsample, yolo_head)
