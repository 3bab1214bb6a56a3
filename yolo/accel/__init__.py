"""Opt-in CPU kernels for inference, each equal to a plain PyTorch computation to float rounding.

- :mod:`yolo.accel.cpu_conv`: :class:`FusedConvCPU`, a BN-folded conv run by oneDNN with its activation fused.
- :mod:`yolo.accel.winograd`: :class:`WinogradConv3x3`, 3x3 stride-1 convs with 2-3x fewer multiplications.
- :mod:`yolo.accel.maxpool`: :class:`FastMaxPool`, Darknet's maxpool without needless padding copies.
- :mod:`yolo.accel.swap`: :func:`use_fast_cpu_kernels`, which puts them into a fused model.

Nothing here is used unless asked for (:func:`yolo.inference.prepare.prepare_for_inference` with
``fast_cpu_kernels``, the Detector's default on the CPU). The oneDNN calls go through ``torch.ops.mkldnn``,
PyTorch's private operator namespace, which :func:`onednn_conv_available` checks before any is built.
"""
