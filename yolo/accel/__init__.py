"""CPU kernels for inference, each equal to a plain PyTorch computation to float rounding.

- :mod:`yolo.accel.cpu_conv`: :class:`FusedConvCPU`, a BN-folded conv run by oneDNN with its activation fused.
- :mod:`yolo.accel.winograd`: :class:`WinogradConv3x3`, 3x3 stride-1 convs with 2-3x fewer multiplications.
- :mod:`yolo.accel.maxpool`: :class:`FastMaxPool`, Darknet's maxpool without needless padding copies.
- :mod:`yolo.accel.swap`: :func:`use_fast_cpu_kernels`, which puts them into a fused model.

They are used through :func:`yolo.inference.prepare.prepare_for_inference` with ``fast_cpu_kernels``, which the
Detector turns on by default on the CPU (``fast=True``; ``fast=False`` runs the plain model): yolov3-tiny's forward
pass at 416x416 takes about two thirds of the plain PyTorch time with them (1.46x faster by the best of 30
interleaved rounds on one thread, 1.61x on two; torch 2.14, a shared 2-core x86 machine), and the Detector's
results have been computed with them since they came. The oneDNN calls go through ``torch.ops.mkldnn``,
PyTorch's private operator namespace: :func:`onednn_conv_available` checks for the operators before any kernel is
built, and :func:`yolo.accel.swap.use_fast_cpu_kernels` gives every layer its plain module back when they do not
run, so a PyTorch without them (or with a changed signature) falls back to the plain convolutions.
"""
